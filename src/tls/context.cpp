#include "sluice/tls/context.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include <boost/asio/ip/address.hpp>

#include "sluice/core/file.hpp"
#include "sluice/tls/acme_challenge.hpp"
#include "sluice/tls/acme_crypto.hpp"
#include "sluice/tls/acme_slot.hpp"

namespace sluice::tls {

namespace ssl = boost::asio::ssl;

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return out;
}

std::string quoted(const std::string& path) { return "'" + path + "'"; }

// OpenSSL's reason for the latest error, and the queue emptied (so that it does not leak into
// the next message).
std::string openssl_reason() {
  const unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  const char* reason = ERR_reason_error_string(e);
  return reason != nullptr ? reason : "error " + std::to_string(e);
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioDeleter>;
using Cert = std::unique_ptr<X509, X509Deleter>;
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;

// The file's contents, or the reason it cannot be read ("cannot read 'x': No such file...").
std::optional<std::string> read_file(const std::string& path, std::string& why) {
  std::string text;
  if (const int error = read_whole_file(path, text); error != 0) {
    why = "cannot read " + quoted(path) + ": " + std::system_category().message(error);
    return std::nullopt;
  }
  return text;
}

std::string asn1_time_text(const ASN1_TIME* t) {
  Bio bio(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(bio.get(), t);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(std::max(0L, n)));
}

// Every certificate in a PEM file, first (the leaf) first; empty with `why` set on failure.
std::vector<Cert> read_certificates(const std::string& path, std::string& why) {
  std::vector<Cert> out;
  const auto text = read_file(path, why);
  if (!text) return out;
  Bio bio(BIO_new_mem_buf(text->data(), static_cast<int>(text->size())));
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(x);
  ERR_clear_error();  // the loop ends on "no start line"
  if (out.empty()) why = quoted(path) + ": no PEM certificate found";
  return out;
}

// Validity window of the leaf certificate: an expired or not yet valid certificate is refused at
// load time rather than discovered by every client.
std::optional<std::string> check_validity(X509* leaf, const std::string& path) {
  if (X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0)
    return quoted(path) + ": certificate expired on " + asn1_time_text(X509_get0_notAfter(leaf));
  if (X509_cmp_current_time(X509_get0_notBefore(leaf)) > 0)
    return quoted(path) + ": certificate not valid before " +
           asn1_time_text(X509_get0_notBefore(leaf));
  return std::nullopt;
}

// Loads a certificate chain and key into `ctx` after checking them; throws on any problem.
std::optional<FileProblem> use_certified_key(SSL_CTX* ctx, const std::string& cert,
                                             const std::string& key) {
  using File = FileProblem::File;
  std::string why;
  auto chain = read_certificates(cert, why);
  if (chain.empty()) return FileProblem{File::cert, why};
  if (auto bad = check_validity(chain.front().get(), cert)) return FileProblem{File::cert, *bad};

  const auto key_text = read_file(key, why);
  if (!key_text) return FileProblem{File::key, why};
  Bio bio(BIO_new_mem_buf(key_text->data(), static_cast<int>(key_text->size())));
  Key pkey(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!pkey) {
    ERR_clear_error();
    return FileProblem{File::key, quoted(key) + ": no PEM private key found (an encrypted key is "
                                                "not supported)"};
  }
  if (X509_check_private_key(chain.front().get(), pkey.get()) != 1) {
    ERR_clear_error();
    return FileProblem{File::key, quoted(key) + ": key does not match the certificate in " + quoted(cert)};
  }
  if (SSL_CTX_use_certificate(ctx, chain.front().get()) != 1)
    return FileProblem{File::cert, quoted(cert) + ": " + openssl_reason()};
  for (std::size_t i = 1; i < chain.size(); ++i) {
    // add1: the context takes its own reference.
    if (SSL_CTX_add1_chain_cert(ctx, chain[i].get()) != 1)
      return FileProblem{File::cert, quoted(cert) + ": chain certificate " + std::to_string(i) + ": " +
                                         openssl_reason()};
  }
  if (SSL_CTX_use_PrivateKey(ctx, pkey.get()) != 1)
    return FileProblem{File::key, quoted(key) + ": " + openssl_reason()};
  return std::nullopt;
}

// Offered protocols in ALPN wire format (RFC 7301 §3.1): HTTP/1.1 only, or h2 first.
constexpr unsigned char alpn_http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
constexpr unsigned char alpn_h2_http11[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// Server side of ALPN: the first of ours the client offers (`arg` non-null: h2 is offered). A
// client offering none of them gets no ALPN answer rather than an alert: it may still speak
// HTTP/1.1.
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned int inlen, void* arg) {
  unsigned char* selected = nullptr;
  const bool h2 = arg != nullptr;
  const unsigned char* ours = h2 ? alpn_h2_http11 : alpn_http11;
  const unsigned ours_size = h2 ? sizeof alpn_h2_http11 : sizeof alpn_http11;
  if (SSL_select_next_proto(&selected, outlen, ours, ours_size, in, inlen) == OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

void set_common_options(SSL_CTX* ctx, bool tls13_only) {
  SSL_CTX_set_min_proto_version(ctx, tls13_only ? TLS1_3_VERSION : TLS1_2_VERSION);
  // Renegotiation is a CPU-exhaustion vector and HTTP/1.1 never needs it; compression is CRIME.
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  // Partial writes and moving buffers: Asio's engine relies on both.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
}

// OpenSSL's verdict stands for "required" (a failure ends the handshake with an alert); for
// "optional" every certificate is let through and SSL_get_verify_result() keeps the failure,
// which read_client_certificate() shows.
int accept_any_certificate(int, X509_STORE_CTX*) { return 1; }

// verify_client: the CAs trusted for client certificates, their names sent in the
// CertificateRequest (so that a client holding several certificates picks the right one), and
// the verify mode. Set on every context of the listener: SNI may switch a connection to any.
void ask_for_client_certificates(SSL_CTX* ctx, const ServerSettings& settings) {
  if (settings.verify_client == VerifyClient::off) return;
  const auto& file = settings.client_ca_file;
  if (auto bad = check_ca_file(file)) throw std::runtime_error(*bad);
  if (SSL_CTX_load_verify_locations(ctx, file.c_str(), nullptr) != 1)
    throw std::runtime_error(quoted(file) + ": " + openssl_reason());
  STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(file.c_str());
  if (names == nullptr) throw std::runtime_error(quoted(file) + ": " + openssl_reason());
  SSL_CTX_set_client_CA_list(ctx, names);  // takes ownership
  if (settings.verify_client == VerifyClient::required)
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  else
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, accept_any_certificate);
}

// Printable ASCII, other bytes (and a space at either end) as \xHH: a valid field value.
std::string field_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool edge = i == 0 || i + 1 == text.size();
    if ((c > 0x20 && c < 0x7f) || (c == ' ' && !edge)) {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out.append(hex, 4);
    }
  }
  return out;
}

std::string subject_text(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return field_safe(std::string_view(data, static_cast<std::size_t>(std::max(0L, n))));
}

// The first DNS, URI or email subjectAltName, in the certificate's order.
std::string first_san(X509* cert) {
  std::string out;
  auto* sans = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (sans == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(sans, i);
    if (gn->type != GEN_DNS && gn->type != GEN_URI && gn->type != GEN_EMAIL) continue;
    const ASN1_STRING* s = gn->d.ia5;  // dNSName, uniformResourceIdentifier, rfc822Name alike
    out = field_safe({reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                      static_cast<std::size_t>(ASN1_STRING_length(s))});
    break;
  }
  GENERAL_NAMES_free(sans);
  return out;
}

std::string sha256_hex(X509* cert) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (X509_digest(cert, EVP_sha256(), digest, &size) != 1) return {};
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < size; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 15]);
  }
  return out;
}

}  // namespace

ClientCertificate read_client_certificate(SSL* ssl) {
  ClientCertificate out;
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) {
    out.verify = "NONE";
    return out;
  }
  out.subject = subject_text(cert);
  out.san = first_san(cert);
  out.fingerprint = sha256_hex(cert);
  const long result = SSL_get_verify_result(ssl);
  out.verify = result == X509_V_OK ? "SUCCESS" : "FAILED:" + field_safe(X509_verify_cert_error_string(result));
  return out;
}

std::optional<FileProblem> check_certified_key(const std::string& cert, const std::string& key) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!ctx) return FileProblem{FileProblem::File::cert, "cannot create a TLS context: " + openssl_reason()};
  return use_certified_key(ctx.get(), cert, key);
}

std::optional<std::string> check_ca_file(const std::string& path) {
  std::string why;
  const auto chain = read_certificates(path, why);
  if (chain.empty()) return why;
  return std::nullopt;
}

std::optional<std::string> check_cipher_list(const std::string& ciphers) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_method()), SSL_CTX_free);
  if (SSL_CTX_set_cipher_list(ctx.get(), ciphers.c_str()) != 1) {
    ERR_clear_error();
    return "no cipher in '" + ciphers + "' is known to OpenSSL";
  }
  return std::nullopt;
}

void CertificateSelector::add(std::string_view name, std::size_t index) {
  auto n = lower(name);
  if (n.starts_with("*.")) {
    wildcard_.push_back({n.substr(2), index});
  } else {
    exact_.push_back({std::move(n), index});
  }
}

std::size_t CertificateSelector::pick(std::string_view server_name) const {
  if (server_name.empty()) return 0;
  const auto name = lower(server_name);
  // First match in certificate order, so that the earlier certificate wins a name listed twice.
  for (const auto& e : exact_)
    if (e.name == name) return e.index;
  const auto dot = name.find('.');
  if (dot != std::string::npos && dot > 0) {
    const std::string_view parent = std::string_view(name).substr(dot + 1);
    for (const auto& e : wildcard_)
      if (e.name == parent) return e.index;
  }
  return 0;
}

std::vector<std::string> certificate_names(const std::string& cert_file) {
  std::vector<std::string> names;
  std::string why;
  const auto chain = read_certificates(cert_file, why);
  if (chain.empty()) return names;
  X509* leaf = chain.front().get();
  auto* sans = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(leaf, NID_subject_alt_name, nullptr, nullptr));
  if (sans != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* gn = sk_GENERAL_NAME_value(sans, i);
      if (gn->type != GEN_DNS) continue;
      const auto* s = gn->d.dNSName;
      names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                         static_cast<std::size_t>(ASN1_STRING_length(s)));
    }
    GENERAL_NAMES_free(sans);
  }
  if (names.empty()) {
    // RFC 6125 §6.4.4: the common name only when there is no DNS subjectAltName.
    char cn[256];
    const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(leaf), NID_commonName, cn, sizeof cn);
    if (n > 0) names.emplace_back(cn, static_cast<std::size_t>(n));
  }
  return names;
}

std::unique_ptr<ssl::context> ServerContext::make_context(const std::function<void(SSL_CTX*)>& use_certificate) const {
  const std::string ciphers = settings_.ciphers.empty() ? std::string(default_ciphers) : settings_.ciphers;
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  set_common_options(native, settings_.min_tls13);
  if (SSL_CTX_set_cipher_list(native, ciphers.c_str()) != 1) throw std::runtime_error("ciphers: " + openssl_reason());
  use_certificate(native);
  // Any non-null argument turns h2 on (select_alpn reads only whether there is one).
  SSL_CTX_set_alpn_select_cb(native, select_alpn, settings_.http2 ? const_cast<ServerContext*>(this) : nullptr);
  ask_for_client_certificates(native, settings_);
  // Session resumption: stateless tickets and the server-side cache for TLS 1.2 session ids.
  // Ticket keys are the file's when there is one, else the fleet's (both shared across reloads
  // and processes), else OpenSSL's random ones per context (a reload starts new ones). Set on
  // every context: which one OpenSSL asks depends on where the handshake is when SNI switches it.
  if (ticket_keys_ != nullptr) ticket_keys_->install(native);
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_SERVER);
  static constexpr unsigned char session_id_context[] = "sluice";
  SSL_CTX_set_session_id_context(native, session_id_context, sizeof session_id_context - 1);
  return ctx;
}

void ServerContext::add_file_certificates() {
  for (std::size_t i = 0; i < settings_.certificates.size(); ++i) {
    const auto& c = settings_.certificates[i];
    contexts_.push_back(make_context([&](SSL_CTX* native) {
      if (auto problem = use_certified_key(native, c.cert, c.key)) throw std::runtime_error(problem->message);
    }));
    if (settings_.ocsp != nullptr && settings_.ocsp_stapling) {
      if (auto staple = settings_.ocsp->watch(c.cert, c.ocsp_responder)) {
        staple_from(contexts_.back()->native_handle(), staple.get());
        staples_.push_back(std::move(staple));
      }
    }
    for (const auto& name : certificate_names(c.cert)) selector_.add(name, i);
  }
}

// The ACME certificate once issued (now, when the slot has one, or when the client installs
// one); until then a listener without certificate files shows a self-signed placeholder, as
// Traefik does: a client gets a handshake it can refuse, not a connection reset.
void ServerContext::add_acme_certificate() {
  if (!settings_.acme) return;
  acme_ = acme::slot_for(settings_.acme->domains, settings_.acme->storage);
  if (contexts_.empty()) {
    const auto key = acme::new_p256_key();
    const auto cert = acme::placeholder_certificate(key.get(), settings_.acme->domains);
    contexts_.push_back(make_context([&](SSL_CTX* native) {
      if (SSL_CTX_use_certificate(native, cert.get()) != 1 || SSL_CTX_use_PrivateKey(native, key.get()) != 1)
        throw std::runtime_error("ACME placeholder certificate: " + openssl_reason());
    }));
  }
  if (settings_.acme->challenge == AcmeChallenge::tls_alpn_01)
    acme::answer_challenges(contexts_.front()->native_handle(), acme_.get());
  acme_->subscribe(this, [this]() -> std::string {
    // Runs on the ACME client's thread (or here): a certificate that does not load leaves the
    // one served before in place, and the client reports why.
    try {
      std::shared_ptr<ssl::context> issued = make_context([&](SSL_CTX* native) {
        if (auto problem = use_certified_key(native, acme_->cert_file(), acme_->key_file()))
          throw std::runtime_error(problem->message);
      });
      acme_context_.store(std::move(issued));
      return {};
    } catch (const std::exception& e) {
      return e.what();
    }
  });
}

bool ServerContext::use_acme_certificate(SSL* ssl, const char* server_name) const {
  if (server_name == nullptr ? !settings_.certificates.empty() : !acme_->serves(server_name)) return false;
  const auto issued = acme_context_.load();
  if (issued == nullptr) return false;
  SSL_set_SSL_CTX(ssl, issued->native_handle());  // takes its own reference
  return true;
}

ServerContext::ServerContext(const ServerSettings& settings) : settings_(settings) {
  if (!settings.session_ticket_key_file.empty()) {
    auto keys = std::make_shared<TicketKeys>();
    if (auto bad = keys->read(settings.session_ticket_key_file)) throw std::runtime_error(*bad);
    ticket_keys_ = std::move(keys);
  } else {
    ticket_keys_ = settings.shared_ticket_keys;
  }
  add_file_certificates();
  add_acme_certificate();
  if (contexts_.empty()) throw std::runtime_error("a TLS listener needs at least one certificate");
  verify_client_ = settings.verify_client;
  // SNI: switches the connection to the context of the certificate that serves the name. Runs
  // inside the handshake on a worker's thread and reads only this object (immutable but for the
  // ACME context, an atomic). The connection keeps its first context's session cache and ticket
  // keys (OpenSSL's session_ctx).
  SSL_CTX* first = contexts_.front()->native_handle();
  SSL_CTX_set_tlsext_servername_arg(first, this);
  SSL_CTX_set_tlsext_servername_callback(first, +[](SSL* ssl, int*, void* arg) -> int {
    const auto* self = static_cast<const ServerContext*>(arg);
    const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (self->acme_ != nullptr && self->use_acme_certificate(ssl, name)) return SSL_TLSEXT_ERR_OK;
    if (name == nullptr) return SSL_TLSEXT_ERR_OK;  // no SNI: the default certificate
    const auto index = self->selector_.pick(name);
    if (index != 0) SSL_set_SSL_CTX(ssl, self->contexts_[index]->native_handle());
    return SSL_TLSEXT_ERR_OK;
  });
}

ServerContext::~ServerContext() {
  if (acme_ != nullptr) acme_->unsubscribe(this);
}

ClientContext::ClientContext(const ClientSettings& settings)
    : context_(ssl::context::tls_client), verify_(settings.verify) {
  SSL_CTX* native = context_.native_handle();
  set_common_options(native, false);
  SSL_CTX_set_cipher_list(native, std::string(default_ciphers).c_str());
  SSL_CTX_set_alpn_protos(native, alpn_http11, sizeof alpn_http11);
  if (verify_) {
    if (!settings.ca_file.empty()) {
      if (auto bad = check_ca_file(settings.ca_file)) throw std::runtime_error(*bad);
      if (SSL_CTX_load_verify_locations(native, settings.ca_file.c_str(), nullptr) != 1)
        throw std::runtime_error(quoted(settings.ca_file) + ": " + openssl_reason());
    } else if (SSL_CTX_set_default_verify_paths(native) != 1) {
      throw std::runtime_error("cannot load the system's trusted CAs: " + openssl_reason());
    }
    SSL_CTX_set_verify(native, SSL_VERIFY_PEER, nullptr);
  } else {
    SSL_CTX_set_verify(native, SSL_VERIFY_NONE, nullptr);
  }
  if (!settings.cert.empty()) {
    if (auto problem = use_certified_key(native, settings.cert, settings.key))
      throw std::runtime_error(problem->message);
  }
}

bool ClientContext::prepare(SSL* ssl, const std::string& server_name) const {
  boost::system::error_code not_ip;
  boost::asio::ip::make_address(server_name, not_ip);
  if (not_ip && SSL_set_tlsext_host_name(ssl, server_name.c_str()) != 1) return false;
  if (!verify_) return true;
  if (!not_ip) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), server_name.c_str()) == 1;
  // RFC 6125: the DNS name must be in the certificate; wildcards only for the leftmost label.
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return SSL_set1_host(ssl, server_name.c_str()) == 1;
}

const char* verify_error(SSL* ssl) {
  const long result = SSL_get_verify_result(ssl);
  if (result == X509_V_OK) return nullptr;
  return X509_verify_cert_error_string(result);
}

}  // namespace sluice::tls
