#include "sluice/idempotency/fingerprint.hpp"

#include <new>

#include <openssl/evp.h>

namespace sluice::idempotency {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) != 1)
    throw std::bad_alloc();
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::part(std::string_view bytes) {
  // The length first (8 bytes, little-endian): the parts' boundaries are part of the digest.
  std::uint8_t length[8];
  auto n = static_cast<std::uint64_t>(bytes.size());
  for (auto& b : length) {
    b = static_cast<std::uint8_t>(n & 0xff);
    n >>= 8;
  }
  auto* ctx = static_cast<EVP_MD_CTX*>(ctx_);
  EVP_DigestUpdate(ctx, length, sizeof length);
  EVP_DigestUpdate(ctx, bytes.data(), bytes.size());
}

Digest Sha256::finish() {
  Digest d{};
  unsigned size = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), d.data(), &size);
  return d;
}

Digest fingerprint(std::string_view method, std::string_view target, std::string_view body) {
  Sha256 h;
  h.part(method);
  h.part(target);
  h.part(body);
  return h.finish();
}

std::string hex(const Digest& d) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(d.size() * 2, '0');
  for (std::size_t i = 0; i < d.size(); ++i) {
    out[2 * i] = digits[d[i] >> 4];
    out[2 * i + 1] = digits[d[i] & 0xf];
  }
  return out;
}

}  // namespace sluice::idempotency
