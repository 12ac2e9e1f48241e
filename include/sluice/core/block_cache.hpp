#pragma once
// Heap memory through a per-thread cache of freed blocks, for the C libraries on the data path
// and for objects made per request: OpenSSL (tls/openssl_memory.hpp), nghttp2 (its sessions'
// streams, frames and HPACK entries; http/h2_frames.hpp) and each HTTP/2 stream.
//
// A block freed waits in the freeing thread's cache, by size class, for the next allocation of
// its class: a worker in steady state takes nothing from the heap for them, where glibc's own
// per-thread cache (7 blocks a size) runs dry as soon as hundreds of streams are open at once.
// The cache is bounded (1 MiB of each small class, 16 blocks of each large one,
// cache_limit_bytes in all; beyond that a freed block goes back to the heap), follows the demand
// where its thread calls shed() (a worker, once a second: after a burst it keeps what its traffic
// uses, not the burst's peak) and is emptied when its thread ends.
//
// Each block carries a 16-byte header (its class and capacity): malloc's alignment is kept, and
// a block freed on another thread than the one that took it is simply cached there.
#include <cstddef>
#include <cstdint>

namespace sluice::block_cache {

// malloc's semantics, as the libraries expect them: allocate(0) and reallocate(p, 0) give
// nullptr, reallocate(nullptr, n) allocates; nullptr when the heap is out.
void* allocate(std::size_t n) noexcept;
void* reallocate(void* p, std::size_t n) noexcept;
void release(void* p) noexcept;
// calloc's: n * size bytes, zeroed (nullptr on overflow).
void* allocate_zeroed(std::size_t n, std::size_t size) noexcept;

// Blocks of up to this size are cached, in classes a power of two or 1.5 times one apart.
inline constexpr std::size_t largest_cached = 64 * 1024;
// What one thread's cache holds at most.
inline constexpr std::size_t cache_limit_bytes = 8 * 1024 * 1024;

// Frees, class by class, the blocks no allocation needed since the last call (the fewest the
// list held since then); returns the bytes freed.
std::size_t shed() noexcept;

// The calling thread's cache.
struct Stats {
  std::uint64_t taken_from_cache = 0;  // allocations served by a cached block
  std::uint64_t taken_from_heap = 0;   // malloc and realloc calls made
  std::size_t cached_bytes = 0;        // the blocks waiting now (capacity)
  std::size_t cached_blocks = 0;
};
Stats this_thread() noexcept;

// The capacity a request of n bytes gets (its class's size; n itself above largest_cached).
std::size_t capacity_for(std::size_t n) noexcept;

}  // namespace sluice::block_cache
