#pragma once
// The cryptography of ACME (RFC 8555) and its TLS-ALPN-01 challenge (RFC 8737), on OpenSSL:
// the account key (ECDSA P-256) and its JWK, JWS signing (ES256, flattened JSON), key
// authorizations, certificate requests, and the self-signed certificates a listener shows while
// it has no issued one or while a challenge is pending. Control plane only (the ACME client's
// thread and context construction); nothing here runs per request.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/evp.h>
#include <openssl/x509.h>

namespace sluice::tls::acme {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* x) const { X509_free(x); }
};
using PrivateKey = std::unique_ptr<EVP_PKEY, KeyFree>;
using Certificate = std::unique_ptr<X509, CertFree>;

// RFC 4648 §5 base64url without padding (RFC 8555 §6.1).
std::string base64url(std::string_view bytes);
std::string sha256(std::string_view bytes);  // the raw 32-byte digest

PrivateKey new_p256_key();  // throws std::runtime_error
std::string key_pem(EVP_PKEY* key);
PrivateKey key_from_pem(const std::string& pem);  // nullptr when it is not a PEM private key

// The public key as a JWK (RFC 7518 §6.2.1) with its members in lexicographic order, so that the
// same text is the thumbprint's input (RFC 7638 §3): {"crv":"P-256","kty":"EC","x":..,"y":..}.
std::string jwk(EVP_PKEY* key);
std::string thumbprint(EVP_PKEY* key);  // base64url(SHA-256(jwk))
// RFC 8555 §8.1: token "." thumbprint.
std::string key_authorization(std::string_view token, EVP_PKEY* account_key);

// A flattened JWS (RFC 7515 §7.2.2) of `payload` ("" for POST-as-GET) signed with ES256: the
// ECDSA signature as R || S, 32 bytes each (RFC 7518 §3.4). `protected_header` is the JSON text
// of the header ({"alg":"ES256","nonce":..,"url":..,"jwk"|"kid":..}).
std::string sign_jws(EVP_PKEY* key, std::string_view protected_header, std::string_view payload);

// A certificate request for `domains` (the first also the subject's CN), DER.
std::string csr_der(EVP_PKEY* key, const std::vector<std::string>& domains);

// RFC 8737 §3: a self-signed certificate for `domain` with the critical acmeIdentifier extension
// (1.3.6.1.5.5.7.1.31) holding the SHA-256 of the key authorization as an OCTET STRING.
Certificate challenge_certificate(EVP_PKEY* key, const std::string& domain, std::string_view key_authorization);
// What a listener shows until its certificate is issued: self-signed, for `domains`, a week long.
Certificate placeholder_certificate(EVP_PKEY* key, const std::vector<std::string>& domains);

}  // namespace sluice::tls::acme
