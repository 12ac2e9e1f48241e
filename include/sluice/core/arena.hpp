#pragma once
// Request-scoped memory. A session borrows a block from its worker's BlockPool when a request's
// head arrives, parses and rewrites both heads in it (Beast's fields take an ArenaAllocator), and
// hands it back when the exchange ends: steady state allocates nothing per request, and an idle
// connection holds no block. Single-threaded, like everything a worker owns.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace sluice {

// Bump allocation over one borrowed block; what does not fit goes to the heap. Freeing inside the
// block is a no-op (the block is reset as a whole), freeing a heap fallback frees it.
class Arena {
public:
  void attach(char* block, std::size_t size) noexcept {
    begin_ = cur_ = block;
    end_ = block + size;
  }
  void reset() noexcept { cur_ = begin_; }
  bool attached() const noexcept { return begin_ != nullptr; }
  char* detach() noexcept {
    char* b = begin_;
    begin_ = cur_ = end_ = nullptr;
    return b;
  }

  void* allocate(std::size_t n, std::size_t align) {
    const auto p = (reinterpret_cast<std::uintptr_t>(cur_) + align - 1) & ~(align - 1);
    if (begin_ != nullptr && p + n <= reinterpret_cast<std::uintptr_t>(end_)) {
      cur_ = reinterpret_cast<char*>(p + n);
      return reinterpret_cast<void*>(p);
    }
    return ::operator new(n, std::align_val_t{align});
  }
  void deallocate(void* p, std::size_t align) noexcept {
    if (p >= static_cast<void*>(begin_) && p < static_cast<void*>(end_)) return;
    ::operator delete(p, std::align_val_t{align});
  }
  std::size_t used() const noexcept { return static_cast<std::size_t>(cur_ - begin_); }

private:
  char* begin_ = nullptr;
  char* cur_ = nullptr;
  char* end_ = nullptr;
};

// A standard allocator over an Arena; default-constructed (no arena) it uses the heap, so types
// built on it work unchanged in tests and on the control plane.
template <class T>
class ArenaAllocator {
public:
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;

  ArenaAllocator() noexcept = default;
  explicit ArenaAllocator(Arena* arena) noexcept : arena_(arena) {}
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>& other) noexcept : arena_(other.arena()) {}

  T* allocate(std::size_t n) {
    if (arena_ == nullptr) return std::allocator<T>{}.allocate(n);
    return static_cast<T*>(arena_->allocate(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (arena_ == nullptr) return std::allocator<T>{}.deallocate(p, n);
    arena_->deallocate(p, alignof(T));
  }
  Arena* arena() const noexcept { return arena_; }

  template <class U>
  bool operator==(const ArenaAllocator<U>& o) const noexcept { return arena_ == o.arena(); }

private:
  Arena* arena_ = nullptr;
};

class BlockPool;

// A standard allocator that takes blocks from a BlockPool for any request that fits one block
// (and the heap beyond): for buffers that are released when a connection goes idle and taken
// again when it wakes, without a malloc either time.
template <class T>
class PoolAllocator {
public:
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;

  PoolAllocator() noexcept = default;
  explicit PoolAllocator(BlockPool* pool) noexcept : pool_(pool) {}
  template <class U>
  PoolAllocator(const PoolAllocator<U>& other) noexcept : pool_(other.pool()) {}

  T* allocate(std::size_t n);
  void deallocate(T* p, std::size_t n) noexcept;
  BlockPool* pool() const noexcept { return pool_; }
  template <class U>
  bool operator==(const PoolAllocator<U>& o) const noexcept { return pool_ == o.pool(); }

private:
  BlockPool* pool_ = nullptr;
};

// Fixed-size blocks recycled within one worker. Bounded: at most max_free blocks are kept, the
// surplus of a burst goes back to the heap. What is kept follows the demand: shed() frees the
// blocks that stayed unused since the last call (the fewest the free list held since then), so a
// worker keeps about the peak of its last interval, and a burst's blocks go back to the heap an
// interval or two after it ends. Optionally tiered: a pool of small blocks chained to
// one of larger blocks serves a PoolAllocator from the smallest tier that fits, so that a buffer
// starts small and takes a large block only when it has to grow (a partial request head then
// pins a 4 KiB block, not 32 KiB).
class BlockPool {
public:
  BlockPool(std::size_t block_size, std::size_t max_free, BlockPool* larger = nullptr)
      : size_(block_size), max_free_(max_free), larger_(larger) {}
  ~BlockPool() {
    for (char* b : free_) delete[] b;
  }
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  std::size_t block_size() const noexcept { return size_; }
  char* acquire() {
    if (free_.empty()) return new char[size_];
    char* b = free_.back();
    free_.pop_back();
    if (free_.size() < fewest_free_) fewest_free_ = free_.size();
    return b;
  }
  void release(char* b) noexcept {
    if (b == nullptr) return;
    if (free_.size() < max_free_) {
      free_.push_back(b);  // capacity reserved up front: never allocates
    } else {
      delete[] b;
    }
  }
  void reserve() { free_.reserve(max_free_); }
  std::size_t free_blocks() const noexcept { return free_.size(); }

  // Frees the blocks no acquire() needed since the last call; returns the bytes freed.
  std::size_t shed() noexcept {
    const auto unused = std::min(fewest_free_, free_.size());
    for (std::size_t i = 0; i < unused; ++i) {
      delete[] free_.back();
      free_.pop_back();
    }
    fewest_free_ = free_.size();
    return unused * size_;
  }

  // A block of the smallest tier of at least n bytes; nullptr when none is that large.
  char* take(std::size_t n) {
    if (n <= size_) return acquire();
    return larger_ != nullptr ? larger_->take(n) : nullptr;
  }
  // Gives back a block that take(n) returned; false if no tier is that large (heap memory).
  bool give(char* b, std::size_t n) noexcept {
    if (n <= size_) {
      release(b);
      return true;
    }
    return larger_ != nullptr && larger_->give(b, n);
  }

private:
  std::size_t size_;
  std::size_t max_free_;
  BlockPool* larger_;
  std::vector<char*> free_;
  std::size_t fewest_free_ = 0;  // the free list's low-water mark since the last shed()
};

// One block of a BlockPool, owned: it goes back to its pool when the handle dies, whoever holds
// it then (a handoff between two owners cannot lose it on the way).
class PooledBlock {
public:
  PooledBlock() noexcept = default;
  PooledBlock(BlockPool& pool, char* block) noexcept : pool_(&pool), data_(block) {}
  PooledBlock(PooledBlock&& o) noexcept : pool_(o.pool_), data_(std::exchange(o.data_, nullptr)) {}
  PooledBlock& operator=(PooledBlock&& o) noexcept {
    if (this != &o) {
      reset();
      pool_ = o.pool_;
      data_ = std::exchange(o.data_, nullptr);
    }
    return *this;
  }
  ~PooledBlock() { reset(); }

  char* get() const noexcept { return data_; }
  void reset() noexcept {
    if (data_ != nullptr) pool_->release(std::exchange(data_, nullptr));
  }

private:
  BlockPool* pool_ = nullptr;
  char* data_ = nullptr;
};

template <class T>
T* PoolAllocator<T>::allocate(std::size_t n) {
  if (pool_ != nullptr)
    if (char* b = pool_->take(n * sizeof(T))) return reinterpret_cast<T*>(b);
  return std::allocator<T>{}.allocate(n);
}

template <class T>
void PoolAllocator<T>::deallocate(T* p, std::size_t n) noexcept {
  if (pool_ != nullptr && pool_->give(reinterpret_cast<char*>(p), n * sizeof(T))) return;
  std::allocator<T>{}.deallocate(p, n);
}

}  // namespace sluice
