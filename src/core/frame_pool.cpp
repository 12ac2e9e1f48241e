#include "sluice/core/frame_pool.hpp"

#include <new>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
// A kept block is poisoned: a frame used after its coroutine ended is still reported.
#define SLUICE_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define SLUICE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define SLUICE_POISON(p, n) ((void)(p), (void)(n))
#define SLUICE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace sluice {

thread_local FramePool* FramePool::current_ = nullptr;

namespace {

// Size class c holds blocks of (c + 1) * granule bytes.
constexpr std::size_t class_of(std::size_t size) noexcept {
  return (size + FramePool::granule - 1) / FramePool::granule - 1;
}
constexpr std::size_t block_size(std::size_t c) noexcept { return (c + 1) * FramePool::granule; }

}  // namespace

FramePool::~FramePool() {
  for (std::size_t c = 0; c < classes; ++c) {
    while (Block* b = free_[c]) {
      SLUICE_UNPOISON(b, block_size(c));
      free_[c] = b->next;
      ::operator delete(b);
    }
  }
}

void* FramePool::allocate(std::size_t size) {
  const std::size_t c = class_of(size);
  if (c >= classes) return ::operator new(size);
  if (FramePool* pool = current_) {
    if (Block* b = pool->free_[c]) {
      SLUICE_UNPOISON(b, block_size(c));
      pool->free_[c] = b->next;
      --pool->count_[c];
      ++pool->reused_;
      return b;
    }
    ++pool->fresh_;
  }
  return ::operator new(block_size(c));
}

void FramePool::deallocate(void* p, std::size_t size) noexcept {
  const std::size_t c = class_of(size);
  if (c >= classes) return ::operator delete(p);
  FramePool* pool = current_;
  if (pool == nullptr || pool->count_[c] >= limit(c)) return ::operator delete(p);
  Block* b = static_cast<Block*>(p);
  b->next = pool->free_[c];
  pool->free_[c] = b;
  ++pool->count_[c];
  SLUICE_POISON(b, block_size(c));
}

FramePool::Use::Use(FramePool& pool) noexcept : previous_(current_) { current_ = &pool; }
FramePool::Use::~Use() { current_ = previous_; }

std::size_t FramePool::kept() const noexcept {
  std::size_t n = 0;
  for (const auto k : count_) n += k;
  return n;
}

}  // namespace sluice
