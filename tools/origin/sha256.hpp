#pragma once
// Incremental SHA-256 over OpenSSL's EVP interface, for `sink=sha256`. One per connection,
// created on first use and reset per request; touched only from the connection's own thread.

#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace sluice::origin {

class sha256 {
 public:
  sha256();
  ~sha256();
  sha256(const sha256&) = delete;
  sha256& operator=(const sha256&) = delete;

  void reset();
  void update(std::string_view bytes);
  // Lower-case hex of the digest; the object must be reset() before it is used again.
  std::string hex_digest();

 private:
  evp_md_ctx_st* ctx_;
};

}  // namespace sluice::origin
