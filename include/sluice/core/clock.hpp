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
  // The clock itself, never a turn's earlier reading (TurnTime below): for a deadline that must
  // not fall early, such as a new connection's header_timeout.
  virtual time_point exact() const noexcept { return now(); }
};

namespace detail {
// The reading of this thread's current turn (TurnTime below); the epoch outside one.
inline constinit thread_local Clock::time_point turn_time{};
}  // namespace detail

// The process-wide monotonic clock. Inside a TurnTime it answers that turn's reading.
class SteadyClock final : public Clock {
public:
  time_point now() const noexcept override {
    const time_point turn = detail::turn_time;
    return turn != time_point{} ? turn : read();
  }
  time_point exact() const noexcept override { return read(); }
  // The clock itself, whatever turn this thread is in.
  static time_point read() noexcept {
    return std::chrono::time_point_cast<duration>(std::chrono::steady_clock::now());
  }
};

// One turn of a worker's event loop: the completion of one I/O wait and the handler it resumes,
// up to that handler's next wait. The clock is read once when the turn starts, and every
// SteadyClock::now() on this thread answers that reading until the turn ends, as nginx reads
// the time once per pass of its event loop. A session's request took 14 clock reads before
// (deadlines, pool expiry, latencies), each a vDSO call. A turn does no blocking work, so its
// reading is behind the clock by microseconds (more when the thread is preempted); a deadline armed
// in it falls that much early, so a new connection's first deadline reads the clock itself (exact()).
// Turns nest (the inner one reads the clock again and gives the outer reading back).
// Armed by tls/edge_io.hpp's readiness wait, through which every session read resumes (all 14
// reads were under it); a handler Asio completes itself (a timer, a connect, the rest of a write)
// is no turn and reads the clock as before.
class TurnTime {
public:
  TurnTime() noexcept : outer_(detail::turn_time) { detail::turn_time = SteadyClock::read(); }
  ~TurnTime() { detail::turn_time = outer_; }
  TurnTime(const TurnTime&) = delete;
  TurnTime& operator=(const TurnTime&) = delete;

private:
  Clock::time_point outer_;
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
