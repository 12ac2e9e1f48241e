#pragma once
// Whether a TLS listener asks its clients for a certificate ([[server.tls]] verify_client), kept
// apart from context.hpp so that the config's types can name it without OpenSSL's headers.
#include <cstdint>

namespace sluice::tls {

enum class VerifyClient : std::uint8_t {
  off,       // no certificate asked for (the default)
  optional,  // asked for; the handshake succeeds without one or with one that fails, and the
             // result is the connection's to show ($client_cert_verify) and to route on
  required,  // a client without a certificate that verifies fails the handshake (a TLS alert)
};

}  // namespace sluice::tls
