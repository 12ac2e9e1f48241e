#pragma once
// One compression library behind the Encoder: a context that lives in a worker's EncoderPool and
// serves one response at a time. Internal to src/compress.
#include <cstdint>
#include <memory>
#include <span>

#include <boost/system/result.hpp>

#include "sluice/compress/encoder.hpp"

namespace sluice::compress {

class Codec {
public:
  enum class Op : std::uint8_t { process, flush, finish };

  virtual ~Codec() = default;
  virtual Coding coding() const noexcept = 0;
  // Ready for a new response: the previous one's state is forgotten (reset, not remade, where
  // the library allows).
  virtual boost::system::error_code start(int level, std::uint64_t size_hint) noexcept = 0;
  virtual boost::system::result<Step> run(std::span<const char> in, std::span<char> out,
                                          Op op) noexcept = 0;
  // The response is over: release what only one response needs.
  virtual void stop() noexcept {}
};

// The pool's allocation functions with the signature libzstd (ZSTD_customMem) and brotli
// (brotli_alloc_func, brotli_free_func) take, `opaque` being the EncoderPool.
inline void* pool_allocate(void* opaque, std::size_t n) {
  return static_cast<EncoderPool*>(opaque)->allocate(n);
}
inline void pool_deallocate(void* opaque, void* p) { static_cast<EncoderPool*>(opaque)->deallocate(p); }

// Each made with the pool's allocation functions; nullptr when the library cannot allocate.
std::unique_ptr<Codec> make_gzip_codec(EncoderPool& pool);
std::unique_ptr<Codec> make_zstd_codec(EncoderPool& pool);
std::unique_ptr<Codec> make_brotli_codec(EncoderPool& pool);

}  // namespace sluice::compress
