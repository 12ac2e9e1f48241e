#pragma once
// One T per worker, each on its own cache line(s), so that state the data path writes on every
// request (a balancer's cursor, a counter) is written by one core only: no line moves between
// cores, and no locked instruction is needed. Readers on other threads (a scrape, the admin API)
// sum or read the slots; they see each slot's latest relaxed store, never a torn value, as long
// as T's members are atomics.
//
// Slots are indexed by the worker's index (WorkerContext::index, 0..workers-1). Sized from the
// worker count when it is known (an upstream built from the config); otherwise
// `default_worker_slots`, so that a test's threads 0..63 each get their own. An index past the
// size wraps (worker % size): two workers then share a slot, which stays race-free (atomics) but
// is no longer single-writer (an increment may be lost), so callers size it from the worker count.
//
// Threading: slot(w) written by worker w only; any thread may read every slot.
#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>

namespace sluice {

inline constexpr unsigned default_worker_slots = 64;

template <class T>
class PerWorker {
public:
  // 64 bytes: the cache line of x86-64 and most ARM cores (std::hardware_destructive_
  // interference_size is not stable across GCC flags, and warns).
  static constexpr std::size_t line = 64;

  explicit PerWorker(unsigned workers = default_worker_slots)
      : count_(workers == 0 ? 1 : workers), slots_(std::make_unique<Slot[]>(count_)) {}

  T& operator[](unsigned worker) noexcept { return slots_[worker % count_].value; }
  const T& operator[](unsigned worker) const noexcept { return slots_[worker % count_].value; }
  unsigned size() const noexcept { return count_; }

  // Calls f(slot) for every slot: summing at scrape, or setting every slot up after construction.
  template <class F>
  void for_each(F&& f) {
    for (unsigned i = 0; i < count_; ++i) f(slots_[i].value);
  }
  template <class F>
  void for_each(F&& f) const {
    for (unsigned i = 0; i < count_; ++i) f(std::as_const(slots_[i].value));
  }

private:
  struct alignas(line) Slot {
    T value{};
  };
  unsigned count_;
  std::unique_ptr<Slot[]> slots_;
};

// Adds to a counter that only its own worker writes: a relaxed load and store, not a locked
// read-modify-write (readers on other threads see the old or the new value, never a torn one).
template <class Int>
void add_own(std::atomic<Int>& counter, Int by = 1) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

}  // namespace sluice
