#pragma once
// Per-thread free lists for coroutine frames, by size class (issue 17, point 4).
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

  FramePool() = default;
  FramePool(const FramePool&) = delete;
  FramePool& operator=(const FramePool&) = delete;
  ~FramePool();  // frees what it keeps

  // Memory for a frame of `size` bytes, from this thread's pool if it has one.
  static void* allocate(std::size_t size);
  // `size` is the size given to allocate() (sized delete passes it on).
  static void deallocate(void* p, std::size_t size) noexcept;

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
  std::uint64_t reused() const noexcept { return reused_; }  // allocations served from them
  std::uint64_t fresh() const noexcept { return fresh_; }    // allocations that went to the heap

private:
  struct Block {
    Block* next;
  };
  static thread_local FramePool* current_;
  std::array<Block*, classes> free_{};
  std::array<std::uint16_t, classes> count_{};
  std::uint64_t reused_ = 0;
  std::uint64_t fresh_ = 0;
};

}  // namespace sluice
