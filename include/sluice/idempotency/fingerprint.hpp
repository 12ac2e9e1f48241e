#pragma once
// What identifies a keyed request (draft-ietf-httpapi-idempotency-key-header §2.4: the key
// travels with a fingerprint of the request, and the same key with another payload is an
// error): SHA-256 over the method, the target and the body. And the store key: SHA-256 over the
// upstream, the scope values (tenants' keys never meet) and the client's key. OpenSSL's EVP.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace sluice::idempotency {

using Digest = std::array<std::uint8_t, 32>;

// Incremental SHA-256. Each part is length-prefixed, so ("ab", "c") and ("a", "bc") differ.
class Sha256 {
public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void part(std::string_view bytes);
  Digest finish();

private:
  void* ctx_;  // EVP_MD_CTX
};

// The request's fingerprint: method, target, body.
Digest fingerprint(std::string_view method, std::string_view target, std::string_view body);

// Lowercase hex of a digest (64 characters).
std::string hex(const Digest& d);

}  // namespace sluice::idempotency
