#include "sluice/tls/acme_challenge.hpp"

#include <stdexcept>

#include "sluice/tls/acme_slot.hpp"

namespace sluice::tls::acme {

namespace {

constexpr std::string_view acme_tls = "acme-tls/1";
constexpr unsigned char acme_tls_wire[] = {10, 'a', 'c', 'm', 'e', '-', 't', 'l', 's', '/', '1'};

// Runs on a worker's thread at the start of every handshake of the listener: two extension
// lookups, and the slot's lock only for a ClientHello offering "acme-tls/1".
int on_client_hello(SSL* ssl, int*, void* arg) {
  const auto* slot = static_cast<const Slot*>(arg);
  const unsigned char* body = nullptr;
  std::size_t size = 0;
  if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &body, &size) != 1 ||
      !alpn_offers(body, size, acme_tls))
    return SSL_CLIENT_HELLO_SUCCESS;
  if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &body, &size) != 1) return SSL_CLIENT_HELLO_SUCCESS;
  const auto context = slot->challenge(sni_host_name(body, size));
  // RFC 8737 §3: without a pending challenge the handshake goes on as any other.
  if (context != nullptr) SSL_set_SSL_CTX(ssl, context->native_handle());
  return SSL_CLIENT_HELLO_SUCCESS;
}

int select_acme_tls(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned int inlen,
                    void*) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, acme_tls_wire, sizeof acme_tls_wire, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // RFC 8737 §3: "acme-tls/1" or nothing
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

bool alpn_offers(const unsigned char* body, std::size_t size, std::string_view protocol) {
  if (size < 2) return false;
  const std::size_t total = (std::size_t{body[0]} << 8) | body[1];
  if (total + 2 > size) return false;
  for (std::size_t i = 2; i < total + 2;) {
    const std::size_t n = body[i];
    if (i + 1 + n > total + 2) return false;
    if (std::string_view(reinterpret_cast<const char*>(body + i + 1), n) == protocol) return true;
    i += 1 + n;
  }
  return false;
}

std::string_view sni_host_name(const unsigned char* body, std::size_t size) {
  // ServerNameList: length(2), then { type(1) = 0 host_name, length(2), name }.
  if (size < 5 || body[2] != 0) return {};
  const std::size_t n = (std::size_t{body[3]} << 8) | body[4];
  if (5 + n > size) return {};
  return {reinterpret_cast<const char*>(body + 5), n};
}

void answer_challenges(SSL_CTX* listener, const Slot* slot) {
  SSL_CTX_set_client_hello_cb(listener, on_client_hello, const_cast<Slot*>(slot));
}

std::shared_ptr<boost::asio::ssl::context> challenge_context(EVP_PKEY* key, X509* cert) {
  auto ctx = std::make_shared<boost::asio::ssl::context>(boost::asio::ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);  // RFC 8737 §4
  if (SSL_CTX_use_certificate(native, cert) != 1 || SSL_CTX_use_PrivateKey(native, key) != 1)
    throw std::runtime_error("ACME: cannot use the challenge certificate");
  SSL_CTX_set_alpn_select_cb(native, select_acme_tls, nullptr);
  // Its own (empty) server name callback: OpenSSL then does not run the listener's, which would
  // switch the handshake to the domain's ordinary certificate.
  SSL_CTX_set_tlsext_servername_callback(native, +[](SSL*, int*, void*) -> int { return SSL_TLSEXT_ERR_OK; });
  return ctx;
}

}  // namespace sluice::tls::acme
