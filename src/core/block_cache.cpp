#include "sluice/core/block_cache.hpp"

#include <array>
#include <bit>
#include <cstdlib>
#include <cstring>

#include "sluice/core/poison.hpp"

namespace sluice::block_cache {
namespace {

// Before every block: its class (or `uncached`) and its capacity. 16 bytes, so that what follows
// keeps malloc's alignment.
struct alignas(16) Header {
  std::uint32_t cls;
  std::uint64_t capacity;
};
static_assert(sizeof(Header) == 16);

constexpr std::uint32_t uncached = ~std::uint32_t{0};

// Classes 16, 24, 32, 48, 64, ..., 49152, 65536: a power of two, then 1.5 times it.
constexpr std::size_t smallest = 16;
constexpr std::size_t class_count = 25;

constexpr std::size_t class_size(std::size_t c) noexcept {
  return (c % 2 == 0 ? smallest : smallest / 2 * 3) << (c / 2);
}
static_assert(class_size(class_count - 1) == largest_cached);

constexpr std::uint32_t class_of(std::size_t n) noexcept {
  if (n <= smallest) return 0;
  const auto k = static_cast<std::uint32_t>(std::bit_width(n - 1));  // 2^(k-1) < n <= 2^k
  if (n <= (std::size_t{3} << (k - 2))) return 2 * (k - 5) + 1;      // 1.5 * 2^(k-1)
  return 2 * (k - 4);
}
static_assert(class_of(17) == 1 && class_of(24) == 1 && class_of(25) == 2 && class_of(33) == 3 &&
              class_of(65536) == class_count - 1);

// How many freed blocks of a class wait at most: 1 MiB of small ones, 16 of the large ones (a
// table: no division per release).
constexpr auto class_limits = [] {
  std::array<std::uint32_t, class_count> limits{};
  for (std::size_t c = 0; c < class_count; ++c) {
    const auto by_bytes = 1024 * 1024 / class_size(c);
    limits[c] = static_cast<std::uint32_t>(by_bytes < 16 ? 16 : by_bytes);
  }
  return limits;
}();

struct FreeBlock {
  FreeBlock* next;
};

// A cached block is poisoned under AddressSanitizer, all but its link: LeakSanitizer follows no
// pointer in poisoned memory, and the blocks behind the first would look leaked.
void poison(FreeBlock* b, std::size_t c) noexcept {
  SLUICE_POISON(reinterpret_cast<char*>(b + 1), class_size(c) - sizeof(FreeBlock));
}
void unpoison(FreeBlock* b, std::size_t c) noexcept {
  SLUICE_UNPOISON(reinterpret_cast<char*>(b + 1), class_size(c) - sizeof(FreeBlock));
}

// Trivial, so that it stays usable while the thread ends (OpenSSL frees its thread state from a
// pthread key destructor, after the thread's C++ objects are gone): once `ended`, blocks go
// straight back to the heap.
struct ThreadCache {
  std::array<FreeBlock*, class_count> heads;
  std::array<std::uint32_t, class_count> counts;
  // The fewest blocks each list held since the last shed(): what no allocation needed.
  std::array<std::uint32_t, class_count> fewest;
  std::uint64_t taken;
  std::uint64_t from_heap;
  std::size_t bytes;
  bool armed;  // CacheEnd registered
  bool ended;
};
constinit thread_local ThreadCache cache{};

// Empties the thread's cache when the thread ends.
struct CacheEnd {
  ~CacheEnd() {
    for (std::size_t c = 0; c < class_count; ++c) {
      while (auto* b = cache.heads[c]) {
        unpoison(b, c);
        cache.heads[c] = b->next;
        std::free(reinterpret_cast<Header*>(b) - 1);
      }
      cache.counts[c] = 0;
    }
    cache.bytes = 0;
    cache.ended = true;
  }
};
thread_local CacheEnd cache_end;

Header* header_of(void* p) noexcept { return static_cast<Header*>(p) - 1; }

void* from_heap(std::size_t capacity, std::uint32_t cls) noexcept {
  if (capacity > SIZE_MAX - sizeof(Header)) return nullptr;
  auto* h = static_cast<Header*>(std::malloc(capacity + sizeof(Header)));
  if (h == nullptr) return nullptr;
  ++cache.from_heap;
  h->cls = cls;
  h->capacity = capacity;
  return h + 1;
}

}  // namespace

std::size_t capacity_for(std::size_t n) noexcept {
  return n > largest_cached ? n : class_size(class_of(n));
}

void* allocate(std::size_t n) noexcept {
  if (n == 0) return nullptr;
  if (n > largest_cached) return from_heap(n, uncached);
  const auto c = class_of(n);
  auto& t = cache;
  if (auto* b = t.heads[c]) {
    unpoison(b, c);
    t.heads[c] = b->next;
    if (--t.counts[c] < t.fewest[c]) t.fewest[c] = t.counts[c];
    t.bytes -= class_size(c);
    ++t.taken;
    return b;  // its header still says its class and capacity
  }
  return from_heap(class_size(c), c);
}

void release(void* p) noexcept {
  if (p == nullptr) return;
  auto* h = header_of(p);
  auto& t = cache;
  const auto c = h->cls;
  if (c == uncached || t.ended || t.counts[c] >= class_limits[c] ||
      t.bytes + class_size(c) > cache_limit_bytes) {
    std::free(h);
    return;
  }
  if (!t.armed) {
    t.armed = true;
    [[maybe_unused]] CacheEnd* volatile end = &cache_end;  // constructed now: its destructor will run
  }
  auto* b = static_cast<FreeBlock*>(p);
  b->next = t.heads[c];
  t.heads[c] = b;
  poison(b, c);
  ++t.counts[c];
  t.bytes += class_size(c);
}

void* reallocate(void* p, std::size_t n) noexcept {
  if (p == nullptr) return allocate(n);
  if (n == 0) {
    release(p);
    return nullptr;
  }
  auto* h = header_of(p);
  if (n <= h->capacity) return p;
  if (h->cls == uncached) {  // a large block grows in place when the heap can
    if (n > SIZE_MAX - sizeof(Header)) return nullptr;
    auto* grown = static_cast<Header*>(std::realloc(h, n + sizeof(Header)));
    if (grown == nullptr) return nullptr;
    ++cache.from_heap;
    grown->capacity = n;
    return grown + 1;
  }
  void* q = allocate(n);
  if (q == nullptr) return nullptr;  // p stays as it was, as with realloc()
  std::memcpy(q, p, h->capacity);
  release(p);
  return q;
}

std::size_t shed() noexcept {
  auto& t = cache;
  std::size_t freed = 0;
  for (std::size_t c = 0; c < class_count; ++c) {
    for (auto unused = std::min(t.fewest[c], t.counts[c]); unused > 0; --unused) {
      auto* b = t.heads[c];
      unpoison(b, c);
      t.heads[c] = b->next;
      --t.counts[c];
      std::free(header_of(b));
      freed += class_size(c);
    }
    t.fewest[c] = t.counts[c];
  }
  t.bytes -= freed;
  return freed;
}

void* allocate_zeroed(std::size_t n, std::size_t size) noexcept {
  if (size != 0 && n > SIZE_MAX / size) return nullptr;
  void* p = allocate(n * size);
  if (p != nullptr) std::memset(p, 0, n * size);
  return p;
}

Stats this_thread() noexcept {
  Stats s;
  s.taken_from_cache = cache.taken;
  s.taken_from_heap = cache.from_heap;
  s.cached_bytes = cache.bytes;
  for (auto n : cache.counts) s.cached_blocks += n;
  return s;
}

}  // namespace sluice::block_cache
