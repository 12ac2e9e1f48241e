#include "sha256.hpp"

#include <openssl/evp.h>

#include <new>

namespace sluice::origin {

sha256::sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr) throw std::bad_alloc{};
  reset();
}

sha256::~sha256() { EVP_MD_CTX_free(ctx_); }

void sha256::reset() { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }

void sha256::update(std::string_view bytes) { EVP_DigestUpdate(ctx_, bytes.data(), bytes.size()); }

std::string sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx_, digest, &size);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (unsigned i = 0; i < size; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 0xf]);
  }
  return out;
}

}  // namespace sluice::origin
