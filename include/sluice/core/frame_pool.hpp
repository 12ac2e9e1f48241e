#pragma once
// Per-thread free lists for coroutine frames, by size class.
//
// Asio recycles awaitable frames through a per-thread cache of 8 blocks, first fit, whatever their
// size: with many sessions suspended at once (64 connections on a worker) it runs out and a frame
// of one size evicts a block of another, so requests went back to malloc (4.5 per request under
// wrk -c64). A class opts its member coroutines into this pool with SLUICE_POOLED_COROUTINES
// (pooled_frame.hpp): their frames come from the free list of their 64-byte size class, on the
// thread that has a pool installed (a worker, for as long as it runs its loop). Anywhere else
// (tests, the control thread, the worker's final drain) frames come from and go to the heap, in
// the same rounded sizes, so any block can join any pool. Single-threaded per pool, like
// everything a worker owns; no locks, no atomics.
#include <array>
#include <cstddef>
#include <cstdint>

namespace sluice {

class FramePool {
public:
  static constexpr std::size_t granule = 64;
  static constexpr std::size_t classes = 32;  // frames up to 2 KiB; larger ones use the heap
  // Kept per class: 512 blocks, and at most 256 KiB (128 of the 2 KiB class).
  static constexpr std::size_t max_per_class = 512;
  static constexpr std::size_t max_bytes_per_class = 256 * 1024;
  static constexpr std::size_t limit(std::size_t size_class) noexcept {
    const std::size_t by_bytes = max_bytes_per_class / ((size_class + 1) * granule);
    return by_bytes < max_per_class ? by_bytes : max_per_class;
  }

  FramePool() {
    for (std::size_t c = 0; c < classes; ++c) limits_[c] = static_cast<std::uint16_t>(limit(c));
  }
  FramePool(const FramePool&) = delete;
  FramePool& operator=(const FramePool&) = delete;
  ~FramePool();  // frees what it keeps

  // Memory for a frame of `size` bytes, from this thread's pool if it has one. Inline: every
  // coroutine frame of the data path comes and goes this way (~10 a request).
  static void* allocate(std::size_t size) {
    const std::size_t c = class_of(size);
    if (FramePool* pool = current_; pool != nullptr && c < classes) {
      if (Block* b = pool->free_[c]) {
        unpoison(b, c);  // before its link is read
        pool->free_[c] = b->next;
        if (--pool->count_[c] < pool->fewest_[c]) pool->fewest_[c] = pool->count_[c];
        ++pool->reused_;
        return b;
      }
    }
    return allocate_fresh(size);
  }
  // `size` is the size given to allocate() (sized delete passes it on).
  static void deallocate(void* p, std::size_t size) noexcept {
    const std::size_t c = class_of(size);
    if (FramePool* pool = current_; pool != nullptr && c < classes && pool->count_[c] < pool->limits_[c]) {
      Block* b = static_cast<Block*>(p);
      b->next = pool->free_[c];
      pool->free_[c] = b;
      ++pool->count_[c];
      poison(b, c);
      return;
    }
    deallocate_fresh(p, size);
  }

  // While a Use lives, `pool` is this thread's pool.
  class Use {
  public:
    explicit Use(FramePool& pool) noexcept;
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

  private:
    FramePool* previous_;
  };

  std::size_t kept() const noexcept;        // blocks on the free lists
  // Frees the blocks no allocate() needed since the last call (each list's low-water mark, as
  // BlockPool::shed()), so that after a burst a worker keeps what its traffic uses rather than
  // up to 256 KiB per class. Returns the bytes freed.
  std::size_t shed() noexcept;
  std::uint64_t reused() const noexcept { return reused_; }  // allocations served from them
  std::uint64_t fresh() const noexcept { return fresh_; }    // allocations that went to the heap

private:
  struct Block {
    Block* next;
  };
  // Size class c holds blocks of (c + 1) * granule bytes.
  static constexpr std::size_t class_of(std::size_t size) noexcept { return (size + granule - 1) / granule - 1; }
  // What allocate() and deallocate() do when this thread's pool cannot serve them.
  static void* allocate_fresh(std::size_t size);
  static void deallocate_fresh(void* p, std::size_t size) noexcept;
  // A kept block is poisoned under AddressSanitizer (a frame used after its coroutine ended is
  // still reported); nothing otherwise.
#if defined(__SANITIZE_ADDRESS__)
  static void poison(Block* b, std::size_t c) noexcept;
  static void unpoison(Block* b, std::size_t c) noexcept;
#else
  static void poison(Block*, std::size_t) noexcept {}
  static void unpoison(Block*, std::size_t) noexcept {}
#endif

  // constinit: no thread_local wrapper call where the inline functions read it.
  static constinit thread_local FramePool* current_;
  std::array<Block*, classes> free_{};
  std::array<std::uint16_t, classes> count_{};
  std::array<std::uint16_t, classes> limits_{};  // limit(c), not divided again at every release
  std::array<std::uint16_t, classes> fewest_{};  // each list's low-water mark since the last shed()
  std::uint64_t reused_ = 0;
  std::uint64_t fresh_ = 0;
};

}  // namespace sluice
