#pragma once
// Which ACME challenge proves a listener's domains ([[server.tls]] acme.challenge), kept apart
// from the ACME client so that the config's types can name it without OpenSSL's headers.
#include <cstdint>

namespace sluice::tls {

enum class AcmeChallenge : std::uint8_t {
  tls_alpn_01,  // RFC 8737: answered by the TLS listener itself (ALPN "acme-tls/1"); the default
  http_01,      // RFC 8555 §8.3: answered on a plain listener (/.well-known/acme-challenge/TOKEN)
};

}  // namespace sluice::tls
