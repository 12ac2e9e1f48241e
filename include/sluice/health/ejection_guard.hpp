#pragma once
// max_ejected_percent for one upstream: passive ejection may never leave more than that share of
// the pool ejected, counted after the ejection. With the default 50 %:
//   pool of 1  → 0 may be ejected (1/1 = 100 % > 50 %): a lone server is never ejected passively
//   pool of 2  → 1        pool of 3 → 1 (2/3 = 67 %)        pool of 10 → 5
// Servers out of the pool count: passive ejections (a slot until their ejection expires) and
// servers that active checks marked down (a slot until they come back up), so that with one server
// down by probes a passive ejection cannot take out the last ones serving. Active checks are never
// limited: a single-server pool is marked down exactly like a three-server pool, and a server
// going down takes its slot even past the limit.
//
// Shared by every ServerHealth of the upstream, so by every worker: lock-free (one CAS loop per
// ejection attempt, which only happens on failures). A refusal is counted and reported to the
// caller, so that it can be logged and exported.
#include <atomic>
#include <cstdint>

namespace sluice::health {

class EjectionGuard {
public:
  EjectionGuard(std::uint32_t pool_size, std::uint32_t max_ejected_percent) noexcept;

  EjectionGuard(const EjectionGuard&) = delete;
  EjectionGuard& operator=(const EjectionGuard&) = delete;

  struct Verdict {
    bool allowed = false;
    std::uint32_t ejected_after = 0;  // ejected servers if this one were ejected too
    std::uint32_t pool_size = 0;
    std::uint32_t max_percent = 0;
  };

  // Takes a slot if ejecting one more server keeps ejected ≤ pool × max_percent / 100.
  // Any thread.
  Verdict try_eject() noexcept;
  // Gives a slot back (the ejection expired, or the server left the pool). Any thread.
  void release() noexcept;
  // Counts a server out without checking the limit: active checks marked it down, or a reload
  // moved an ejected server into this upstream's new guard. Any thread.
  void adopt() noexcept { ejected_.fetch_add(1, std::memory_order_acq_rel); }

  // Most servers that may be ejected at once: floor(pool × max_percent / 100).
  std::uint32_t capacity() const noexcept;
  std::uint32_t ejected() const noexcept { return ejected_.load(std::memory_order_acquire); }
  std::uint64_t refusals() const noexcept { return refusals_.load(std::memory_order_relaxed); }
  std::uint32_t pool_size() const noexcept { return pool_size_.load(std::memory_order_relaxed); }
  std::uint32_t max_percent() const noexcept { return max_percent_.load(std::memory_order_relaxed); }

  // Reload: the pool grew or shrank, or the percentage changed. Ejections already in place stay
  // until they expire even if the new limit is lower; new ones are refused until below it.
  void reconfigure(std::uint32_t pool_size, std::uint32_t max_ejected_percent) noexcept;

private:
  std::atomic<std::uint32_t> pool_size_;
  std::atomic<std::uint32_t> max_percent_;
  std::atomic<std::uint32_t> ejected_{0};
  std::atomic<std::uint64_t> refusals_{0};
};

}  // namespace sluice::health
