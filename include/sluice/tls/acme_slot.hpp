#pragma once
// One ACME certificate's live state, shared by the ACME client (which orders it) and the TLS
// listeners serving its domains (which show it): the issued certificate's files, the
// TLS-ALPN-01 challenge certificates pending, and what the client last did (for the status API).
//
// Slots live for the whole process, one per domain list, so that a reload's new listener
// contexts find the certificate the old ones showed. Threads: install(), set_challenge() and the
// status setters run on the ACME client's thread; challenge() runs on workers inside handshakes
// that offer ALPN "acme-tls/1" (a mutex, held for a map lookup); subscribe() and unsubscribe()
// run where listener contexts are built and destroyed (control thread, workers dropping the last
// reference to an old snapshot).
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ssl/context.hpp>

namespace sluice::tls::acme {

using SystemTime = std::chrono::system_clock::time_point;

// What /api/status and /metrics show of one certificate.
struct SlotStatus {
  std::optional<SystemTime> not_after;  // of the certificate served; nullopt = none issued yet
  std::string last_error;               // of the latest failed attempt; "" after a success
  std::optional<SystemTime> next_attempt;
  unsigned failures = 0;  // consecutive
};

// A challenge this instance's client is answering, as another instance of a fleet needs it to
// answer it too (the CA's validation may reach any of them): the kind, the domain (TLS-ALPN-01)
// or token (HTTP-01), and the key authorization.
struct PendingChallenge {
  bool alpn = false;
  std::string name;  // domain for TLS-ALPN-01, token for HTTP-01
  std::string key_authorization;
  bool operator==(const PendingChallenge&) const = default;
};

class Slot {
public:
  // Reads a certificate kept in `storage` from an earlier run, if valid now.
  Slot(std::vector<std::string> domains, std::string storage);
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

  const std::vector<std::string>& domains() const noexcept { return domains_; }
  bool serves(std::string_view server_name) const noexcept;
  // Where this certificate is kept: storage/<first domain>/{cert.pem,key.pem}.
  std::string directory() const;
  std::string cert_file() const { return directory() + "/cert.pem"; }
  std::string key_file() const { return directory() + "/key.pem"; }

  // A listener context showing this certificate: called now when one is issued, and at every
  // install() after, until unsubscribed. It returns "" or why it could not load the files.
  using Listener = std::function<std::string()>;
  void subscribe(const void* owner, Listener on_install);
  void unsubscribe(const void* owner);
  bool issued() const;
  // The files at cert_file()/key_file() hold a new certificate valid until `not_after`: every
  // listener loads it. Returns "" or the first listener's reason for refusing it.
  std::string install(SystemTime not_after);

  // TLS-ALPN-01 (RFC 8737): the certificate a validation handshake for `domain` gets.
  void set_challenge(const std::string& domain, std::shared_ptr<boost::asio::ssl::context> context);
  // HTTP-01 (RFC 8555 §8.3): the body answering /.well-known/acme-challenge/<token>.
  void set_http_answer(const std::string& token, std::string key_authorization);
  std::optional<std::string> http_answer(std::string_view token) const;
  void clear_challenges();  // both kinds, and the pending list
  // Answers `c` on this instance (a TLS-ALPN-01 certificate made for it, or the HTTP-01 body)
  // and lists it as pending (pending_challenges()).
  void answer(const PendingChallenge& c);
  std::vector<PendingChallenge> pending_challenges() const;
  std::shared_ptr<boost::asio::ssl::context> challenge(std::string_view domain) const;

  SlotStatus status() const;
  void set_status(SlotStatus status);

private:
  const std::vector<std::string> domains_;
  const std::string storage_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<boost::asio::ssl::context>, std::less<>> challenges_;
  std::map<std::string, std::string, std::less<>> http_answers_;
  std::vector<PendingChallenge> pending_;
  std::vector<std::pair<const void*, Listener>> listeners_;
  SlotStatus status_;
};

// The process's slot for `domains` (made on first use; `storage` is [acme] storage).
std::shared_ptr<Slot> slot_for(const std::vector<std::string>& domains, const std::string& storage);
// Every slot made so far, for the status API and metrics.
std::vector<std::shared_ptr<Slot>> all_slots();
// The HTTP-01 answer for the request target `target` when it is /.well-known/acme-challenge/
// <token> of a pending challenge; nullopt for every other target (checked without allocating).
std::optional<std::string> http_challenge_answer(std::string_view target);

// When a certificate valid from `not_before` to `not_after` is renewed: with a third of its
// lifetime left (Let's Encrypt's advice, as Caddy and certbot do).
SystemTime renewal_time(SystemTime not_before, SystemTime not_after);
// The wait before retry `failures` (1, 2, ...): a minute doubling up to a day, as a CA's rate
// limits expect from a client that keeps failing.
std::chrono::seconds retry_delay(unsigned failures);

// The validity window of the leaf of a PEM file; nullopt when it cannot be read.
std::optional<std::pair<SystemTime, SystemTime>> certificate_window(const std::string& cert_file);
// The same of PEM text.
std::optional<std::pair<SystemTime, SystemTime>> pem_certificate_window(const std::string& pem);

}  // namespace sluice::tls::acme
