#pragma once
// TLS configuration turned into OpenSSL contexts (control plane: start-up and reload), and the
// checks the config loader runs on certificate, key and CA files so that a bad file is a config
// error naming it.
//
// A ServerContext (one per [[server.tls]] listener) and a ClientContext (one per upstream with
// TLS servers) are immutable once built and shared by every worker through the config snapshot:
// OpenSSL contexts are safe to use from several threads once set up. A reload builds new ones;
// connections made before it keep the context they started with (they hold a reference).
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ssl/context.hpp>

#include "sluice/tls/acme_challenge_kind.hpp"
#include "sluice/tls/ocsp_stapler.hpp"
#include "sluice/tls/ticket_keys.hpp"
#include "sluice/tls/verify_client.hpp"

namespace sluice::tls {

// The TLS 1.2 cipher list used unless `ciphers` says otherwise: forward-secret AEAD suites only
// (Mozilla's "intermediate" list). TLS 1.3 suites are OpenSSL's defaults, all AEAD.
inline constexpr std::string_view default_ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// What is wrong with a certificate/key pair, and which of the two files it is about.
struct FileProblem {
  enum class File { cert, key } file;
  std::string message;  // names the file: "cannot read 'x.pem': No such file or directory"
};

// Loads a PEM certificate chain and its private key as a server (or client) certificate would
// be: unreadable, unparsable, expired or not yet valid certificates and keys that do not match
// the certificate are reported. nullopt = fine.
std::optional<FileProblem> check_certified_key(const std::string& cert, const std::string& key);
// A PEM bundle of trusted CA certificates (at least one). nullopt = fine, else the message.
std::optional<std::string> check_ca_file(const std::string& path);
// A cipher list OpenSSL accepts (TLS 1.2 syntax). nullopt = fine, else the message.
std::optional<std::string> check_cipher_list(const std::string& ciphers);

// SNI: which certificate answers a server name. Exact names first, then a wildcard
// "*.example.com" covering exactly one more label ("a.example.com", not "a.b.example.com" nor
// "example.com"), as certificates themselves match (RFC 6125 §6.4.3); else the default, the first
// certificate. Names are compared case-insensitively (DNS, RFC 4343).
class CertificateSelector {
public:
  // `name` as found in a certificate (DNS subjectAltName, else its common name).
  void add(std::string_view name, std::size_t index);
  std::size_t pick(std::string_view server_name) const;

private:
  struct Entry {
    std::string name;  // lower-case; wildcards stored without the "*."
    std::size_t index;
  };
  std::vector<Entry> exact_;
  std::vector<Entry> wildcard_;
};

// The DNS names a certificate serves: its DNS subjectAltNames, else its subject's common name.
std::vector<std::string> certificate_names(const std::string& cert_file);

// What the contexts are built from, in this module's own terms: tls/ is below config/ (whose
// loader runs the checks above), so the snapshot and the upstream copy these from their config.
struct CertificateFiles {
  std::string cert;
  std::string key;
  std::string ocsp_responder;  // "" = the certificate's own (AIA)
};
// A listener's certificate from an ACME CA: its domains, served by the slot the ACME client
// fills (acme_slot.hpp), and where the slot keeps it.
struct AcmeSettings {
  std::vector<std::string> domains;
  std::string storage;
  AcmeChallenge challenge = AcmeChallenge::tls_alpn_01;
};
namespace acme {
class Slot;
}

struct ServerSettings {  // one [[server.tls]] listener
  std::vector<CertificateFiles> certificates;  // chosen by SNI; the first is the default
  std::optional<AcmeSettings> acme;            // the ACME certificate, chosen for its domains
  bool min_tls13 = false;
  std::string ciphers;  // TLS 1.2 cipher list; "" = default_ciphers
  VerifyClient verify_client = VerifyClient::off;
  std::string client_ca_file;  // needed unless verify_client is off
  std::string session_ticket_key_file;  // wins over shared_ticket_keys
  // The fleet's ticket keys, replaced at each rotation; null (and no file) = OpenSSL's random
  // ticket keys, per context.
  std::shared_ptr<TicketKeys> shared_ticket_keys;
  bool ocsp_stapling = true;  // for the certificates with a responder, when `ocsp` is given
  OcspStapler* ocsp = nullptr;  // the process's stapler; null = no stapling (tests, tools)
  bool http2 = false;  // ALPN offers h2 first, then http/1.1
};
struct ClientSettings {  // one upstream's tls_verify, tls_ca_file, tls_cert, tls_key
  bool verify = true;
  std::string ca_file;  // "" = the system's trusted CAs
  std::string cert;     // client certificate (with key), optional
  std::string key;
};

class ServerContext {
public:
  // Throws std::runtime_error naming the file when a certificate or key cannot be loaded.
  explicit ServerContext(const ServerSettings& settings);
  ~ServerContext();
  ServerContext(const ServerContext&) = delete;
  ServerContext& operator=(const ServerContext&) = delete;

  // The context new connections start with (the first certificate); the SNI callback switches a
  // connection to another certificate's context during its handshake.
  boost::asio::ssl::context& context() noexcept { return *contexts_.front(); }
  const CertificateSelector& selector() const noexcept { return selector_; }
  VerifyClient verify_client() const noexcept { return verify_client_; }
  // The OCSP staples of its certificates that have one (metrics).
  const std::vector<std::shared_ptr<OcspStaple>>& staples() const noexcept { return staples_; }

private:
  using Context = boost::asio::ssl::context;
  // A context with the listener's options and the certificate `use_certificate` puts in it.
  std::unique_ptr<Context> make_context(const std::function<void(SSL_CTX*)>& use_certificate) const;
  void add_file_certificates();
  void add_acme_certificate();
  // Switches `ssl` to the issued ACME certificate when it serves `server_name` (nullptr: no SNI,
  // on a listener without certificate files); false when another certificate answers.
  bool use_acme_certificate(SSL* ssl, const char* server_name) const;

  ServerSettings settings_;
  std::vector<std::unique_ptr<Context>> contexts_;
  CertificateSelector selector_;
  VerifyClient verify_client_ = VerifyClient::off;
  // The file's or the fleet's; null = OpenSSL's own per context.
  std::shared_ptr<const TicketKeys> ticket_keys_;
  std::vector<std::shared_ptr<OcspStaple>> staples_;  // what the contexts' status callbacks read
  // The ACME certificate: the slot's issued one, swapped in by the ACME client's thread while
  // handshakes read it (a connection holds its SSL_CTX by reference, so a swap drops none).
  std::shared_ptr<acme::Slot> acme_;
  std::atomic<std::shared_ptr<Context>> acme_context_;
};

// What a client showed at the handshake of a listener with verify_client on: read once per
// connection, after its handshake, and then only viewed ($client_cert_* in header rules, the
// access log). Every text is printable ASCII without leading or trailing space (bytes outside it
// are written as \xHH), so that it is always a valid header field value (RFC 9110 §5.5).
struct ClientCertificate {
  std::string subject;      // RFC 2253 ("CN=alice,O=Example"); "" without a certificate
  std::string san;          // the first DNS, URI or email subjectAltName; "" when none
  std::string fingerprint;  // SHA-256 of the DER certificate, lower-case hex
  std::string verify;       // "SUCCESS", "NONE" (no certificate) or "FAILED:<OpenSSL's reason>"
  bool verified() const noexcept { return verify == "SUCCESS"; }
};
ClientCertificate read_client_certificate(SSL* ssl);

class ClientContext {
public:
  // Throws std::runtime_error naming the file when the CA file or client certificate cannot be
  // loaded.
  explicit ClientContext(const ClientSettings& settings);
  boost::asio::ssl::context& context() noexcept { return context_; }
  bool verify() const noexcept { return verify_; }

  // Per connection, before the handshake: SNI (not for IP literals, RFC 6066 §3) and the name or
  // address the certificate must carry when verifying. `server_name` is tls_server_name, else the
  // server's host. Returns false when OpenSSL refuses the name.
  bool prepare(SSL* ssl, const std::string& server_name) const;

private:
  boost::asio::ssl::context context_;
  bool verify_;
};

// After a failed handshake: OpenSSL's reason ("self-signed certificate", "certificate has
// expired", "hostname mismatch", ...) when the peer's certificate was rejected, else nullptr.
// The text is static storage.
const char* verify_error(SSL* ssl);

}  // namespace sluice::tls
