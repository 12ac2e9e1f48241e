#pragma once
// TLS-ALPN-01 (RFC 8737) on a TLS listener: a ClientHello offering ALPN "acme-tls/1" for a
// domain whose challenge is pending is switched, before SNI and ALPN are handled, to a context
// that shows the challenge certificate and selects "acme-tls/1". Every other handshake is left
// as it was; the data path is not involved (the CA closes the connection after the handshake).
#include <memory>
#include <string_view>

#include <boost/asio/ssl/context.hpp>
#include <openssl/ssl.h>

#include "sluice/tls/acme_crypto.hpp"

namespace sluice::tls::acme {

class Slot;

// Installs the ClientHello callback on a listener's first context (the one every connection
// starts with). `slot` outlives the context.
void answer_challenges(SSL_CTX* listener, const Slot* slot);

// The context a validation handshake is switched to: `cert` (challenge_certificate()) and its key,
// ALPN "acme-tls/1" only.
std::shared_ptr<boost::asio::ssl::context> challenge_context(EVP_PKEY* key, X509* cert);

// Whether an ALPN extension's body (RFC 7301 §3.1: a 2-byte length, then length-prefixed names)
// offers `protocol`.
bool alpn_offers(const unsigned char* body, std::size_t size, std::string_view protocol);
// The host_name of a server_name extension's body (RFC 6066 §3); "" when there is none.
std::string_view sni_host_name(const unsigned char* body, std::size_t size);

}  // namespace sluice::tls::acme
