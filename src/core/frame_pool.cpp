#include "sluice/core/frame_pool.hpp"

#include <algorithm>
#include <new>

#include "sluice/core/poison.hpp"

namespace sluice {

constinit thread_local FramePool* FramePool::current_ = nullptr;

namespace {

constexpr std::size_t block_size(std::size_t c) noexcept { return (c + 1) * FramePool::granule; }

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
void FramePool::poison(Block* b, std::size_t c) noexcept { SLUICE_POISON(b, block_size(c)); }
void FramePool::unpoison(Block* b, std::size_t c) noexcept { SLUICE_UNPOISON(b, block_size(c)); }
#endif

FramePool::~FramePool() {
  for (std::size_t c = 0; c < classes; ++c) {
    while (Block* b = free_[c]) {
      unpoison(b, c);
      free_[c] = b->next;
      ::operator delete(b);
    }
  }
}

void* FramePool::allocate_fresh(std::size_t size) {
  const std::size_t c = class_of(size);
  if (c >= classes) return ::operator new(size);
  if (FramePool* pool = current_) ++pool->fresh_;
  return ::operator new(block_size(c));
}

void FramePool::deallocate_fresh(void* p, std::size_t) noexcept { ::operator delete(p); }

FramePool::Use::Use(FramePool& pool) noexcept : previous_(current_) { current_ = &pool; }
FramePool::Use::~Use() { current_ = previous_; }

std::size_t FramePool::shed() noexcept {
  std::size_t bytes = 0;
  for (std::size_t c = 0; c < classes; ++c) {
    for (auto unused = std::min(fewest_[c], count_[c]); unused > 0; --unused) {
      Block* b = free_[c];
      unpoison(b, c);
      free_[c] = b->next;
      --count_[c];
      ::operator delete(b);
      bytes += block_size(c);
    }
    fewest_[c] = count_[c];
  }
  return bytes;
}

std::size_t FramePool::kept() const noexcept {
  std::size_t n = 0;
  for (const auto k : count_) n += k;
  return n;
}

}  // namespace sluice
