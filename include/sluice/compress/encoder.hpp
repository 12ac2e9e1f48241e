#pragma once
// Streaming encoders, one per compressed response, from a per-worker pool that keeps the
// libraries' contexts between responses.
//
// Thread: an EncoderPool and every Encoder taken from it belong to one worker thread. The pool
// must outlive its encoders (a worker's pool is destroyed after its sessions).
//
// The relay's loop, for each piece of body read from the origin (`out` a buffer of any size, a
// few KiB is plenty; nothing is written past its end):
//
//   while (!piece.empty()) {
//     auto step = enc.feed(piece, out);          // takes what it can, writes what it has
//     if (!step) fail(step.error());
//     send(out.first(step->produced));          // may be 0 bytes: the library holds them
//     piece = piece.subspan(step->consumed);
//   }
//   do { step = enc.flush(out); send(out.first(step->produced)); } while (!step->done);
//
// and at the end of the body `finish` the same way. flush() makes everything fed so far
// decodable by the client (zlib Z_SYNC_FLUSH, ZSTD_e_flush, BROTLI_OPERATION_FLUSH): call it
// before waiting for the origin again, so that a slow or streaming origin's bytes are not held
// back. Each flush costs a few bytes and a little ratio; after reads of 16 KiB or more it is
// negligible (bench/results/compression.md).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include "sluice/compress/coding.hpp"
#include "sluice/compress/eligibility.hpp"

namespace sluice::compress {

enum class Error : std::uint8_t {
  out_of_memory = 1,  // the library could not allocate its state
  library,            // the library refused its input or parameters (a sluice bug)
};
const boost::system::error_category& error_category() noexcept;
boost::system::error_code make_error_code(Error e) noexcept;

struct Step {
  std::size_t consumed = 0;  // input bytes taken (feed only)
  std::size_t produced = 0;  // bytes written at the start of the output span
  // feed: every input byte was taken. flush, finish: nothing is left to write — call again with
  // fresh output space until it is true. After finish is done the stream is complete.
  bool done = false;
};

class Codec;  // one library's context (src/compress/codec.hpp)
class EncoderPool;

// One response's encoder. Move-only; destroying it (finished or not) hands its context back to
// the pool, where it is reset before its next response.
class Encoder {
public:
  Encoder() = default;
  Encoder(Encoder&& other) noexcept;
  Encoder& operator=(Encoder&& other) noexcept;
  ~Encoder();

  explicit operator bool() const noexcept { return codec_ != nullptr; }
  Coding coding() const noexcept;  // identity for an empty Encoder

  // Only on an encoder from EncoderPool::acquire (not a default-made or moved-from one). `out`
  // may be of any size, even 1 byte; nothing is written past it. After an error the response
  // cannot go on (its coded stream is broken): end it as a failed relay.
  boost::system::result<Step> feed(std::span<const char> in, std::span<char> out) noexcept;
  boost::system::result<Step> flush(std::span<char> out) noexcept;
  boost::system::result<Step> finish(std::span<char> out) noexcept;

private:
  friend class EncoderPool;
  Encoder(Codec* codec, EncoderPool* pool) noexcept : codec_(codec), pool_(pool) {}
  void release() noexcept;
  Codec* codec_ = nullptr;
  EncoderPool* pool_ = nullptr;
};

struct PoolLimits {
  std::size_t idle_per_coding = 8;  // contexts kept for the next responses, per coding
  // Freed library blocks kept for reuse (brotli has no reset: each response's encoder is made
  // again, from these blocks instead of malloc).
  std::size_t cached_bytes = 16 * 1024 * 1024;
};

class EncoderPool {
public:
  explicit EncoderPool(PoolLimits limits = {});
  ~EncoderPool();
  EncoderPool(const EncoderPool&) = delete;
  EncoderPool& operator=(const EncoderPool&) = delete;

  // An encoder for one response. `size_hint`: the body's length when known (Content-Length),
  // else 0; zstd and brotli size their window and tables to it (memory: docs/compression.md).
  // A hint, not a promise: a body that ends early or runs long still codes correctly. Fails
  // only when the library cannot allocate.
  boost::system::result<Encoder> acquire(Coding c, int level, std::uint64_t size_hint = 0) noexcept;

  // Frees every idle context and cached block (the worker's periodic memory shedding).
  void shed() noexcept;

  struct Stats {
    std::uint64_t system_allocs = 0;  // blocks the libraries obtained from malloc
    std::uint64_t cache_hits = 0;     // blocks they obtained from the pool's cache instead
    std::uint64_t contexts_made = 0;  // contexts created (a miss of the idle lists)
    std::size_t cached_bytes = 0;     // held in the block cache now
  };
  const Stats& stats() const noexcept { return stats_; }

  // The libraries' allocation functions (zlib zalloc, ZSTD_customMem, brotli_alloc_func) call
  // these with the pool as their opaque pointer.
  void* allocate(std::size_t n) noexcept;
  void deallocate(void* p) noexcept;

private:
  friend class Encoder;
  void release(Codec* codec) noexcept;
  void drop_cache() noexcept;

  static constexpr std::size_t classes = 27;  // block size classes 2^5 .. 2^31
  struct Block;
  PoolLimits limits_;
  std::vector<std::unique_ptr<Codec>> idle_[3];  // gzip, zstd, br; capacity reserved up front
  Block* free_[classes] = {};
  Stats stats_;
};

// `plan`'s encoder, from `pool` at the policy's level for its coding, into `out`. A pool that
// cannot allocate leaves the body as it is: the plan comes back as identity with its ETag kept
// (the response still qualified: its Vary stays).
Plan take_encoder(Plan plan, const Policy& policy, EncoderPool& pool, std::uint64_t size_hint, Encoder& out) noexcept;

}  // namespace sluice::compress

namespace boost::system {
template <>
struct is_error_code_enum<sluice::compress::Error> : std::true_type {};
}  // namespace boost::system
