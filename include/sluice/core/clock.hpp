#pragma once
// Time source for every piece of timing logic (health schedules, fail windows, slow start,
// retry backoff, budgets, pool expiry). Production code uses steady_clock(); unit tests use
// ManualClock and advance it by hand, so no test ever sleeps.
#include <atomic>
#include <chrono>

namespace sluice {

class Clock {
public:
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<std::chrono::steady_clock, duration>;

  virtual ~Clock() = default;
  // Thread-safe: may be called from any worker or the control thread.
  virtual time_point now() const noexcept = 0;
};

// The process-wide monotonic clock.
class SteadyClock final : public Clock {
public:
  time_point now() const noexcept override {
    return std::chrono::time_point_cast<duration>(std::chrono::steady_clock::now());
  }
};

const Clock& steady_clock();

// A clock that moves only when a test says so. Thread-safe reads; advance() from the test thread.
class ManualClock final : public Clock {
public:
  explicit ManualClock(time_point start = time_point{std::chrono::hours(1)}) : now_(start.time_since_epoch().count()) {}
  time_point now() const noexcept override {
    return time_point{duration{now_.load(std::memory_order_acquire)}};
  }
  void advance(duration d) noexcept { now_.fetch_add(d.count(), std::memory_order_acq_rel); }
  void set(time_point t) noexcept { now_.store(t.time_since_epoch().count(), std::memory_order_release); }

private:
  std::atomic<duration::rep> now_;
};

}  // namespace sluice
