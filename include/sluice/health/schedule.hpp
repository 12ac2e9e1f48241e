#pragma once
// When to probe one server. The first probe comes at a uniformly random offset in [0, interval)
// after the start (so that a reload does not fire every probe at once), and each next probe
// `interval × (1 ± jitter)` after the previous one, uniformly (so that servers started together
// do not stay in lock-step). Next times count from the previous *scheduled* time, not from when the
// probe finished, so slow probes do not make the schedule drift.
//
// Randomness comes from a small seeded generator (SplitMix64) with our own uniform mapping rather
// than <random>'s distributions, whose output differs between standard libraries: the same seed
// gives the same schedule everywhere. seed_for() derives a per-server seed from the identity.
//
// What jitter buys, and what it does not: probes of many servers behave like independent random
// arrivals. 50 servers at 5 s (10 probes/s) give ~1 probe per 100 ms on average, and over an hour
// the busiest 100 ms window holds about 8 (never 50, as with synchronised timers). A hard cap per
// window would need coordination between servers, which this class deliberately does not do.
//
// Not thread-safe: one per server, driven by the prober on the control thread.
#include <cmath>
#include <cstdint>
#include <deque>
#include <string_view>

#include "sluice/core/clock.hpp"

namespace sluice::health {

class ProbeSchedule {
public:
  // jitter is clamped to [0, 0.5] (config validation rejects anything else).
  ProbeSchedule(Clock::duration interval, double jitter, std::uint64_t seed) noexcept;

  // start + uniform [0, interval).
  Clock::time_point first(Clock::time_point start) noexcept;
  // previous + interval × uniform [1 - jitter, 1 + jitter].
  Clock::time_point next(Clock::time_point previous) noexcept;

  Clock::duration interval() const noexcept { return interval_; }
  double jitter() const noexcept { return jitter_; }

  // A per-server seed: stable for a given (identity, base) pair and different across identities.
  // Production passes a random base chosen once per process; tests pass a constant.
  static std::uint64_t seed_for(std::string_view identity, std::uint64_t base) noexcept;

private:
  double uniform() noexcept;  // [0, 1)

  Clock::duration interval_;
  double jitter_;
  std::uint64_t state_;
};

// Where a probe due at `due` actually wakes up: the next multiple of `grid` (of the clock's epoch),
// so that probes due within one grid step start on one timer expiry, in one wake-up of the control
// thread. Without it 1,000 servers at 1 s mean ~1,000 separate wake-ups a second, and the
// wake-ups (epoll_wait returns, context switches) were half the probing cost; with a 10 ms grid
// there are at most 100, and probes start at most one grid step late (well inside any jitter).
inline constexpr Clock::duration probe_grid = std::chrono::milliseconds(10);
constexpr Clock::time_point align_up(Clock::time_point due, Clock::duration grid) noexcept {
  if (grid <= Clock::duration::zero()) return due;
  const auto since = due.time_since_epoch();
  auto steps = since / grid;
  if (since % grid != Clock::duration::zero() && since > Clock::duration::zero()) ++steps;
  return Clock::time_point(steps * grid);
}

// Paces the probe starts of a whole prober: at most `cap` in any sliding `window`. A probe that
// would be one too many is deferred until the oldest start of the window has left it, so bursts
// are flattened (jitter alone leaves the busiest 100 ms window of 50 servers at 5 s with ~8 probes;
// paced, it holds at most the cap). Starts are admitted in arrival order and never earlier than
// the previous one, which keeps the check O(1). Control thread only.
class ProbePacer {
public:
  ProbePacer(Clock::duration window, std::size_t cap) : window_(window), cap_(cap == 0 ? 1 : cap) {}
  // When a probe due at `wanted` may start (>= wanted); the start is recorded.
  Clock::time_point admit(Clock::time_point wanted);
  void set_cap(std::size_t cap) noexcept { cap_ = cap == 0 ? 1 : cap; }
  std::size_t cap() const noexcept { return cap_; }
  Clock::duration window() const noexcept { return window_; }

  // The cap a fleet needs: twice the mean number of starts per window, and at least 5.
  static std::size_t cap_for(double probes_per_second, Clock::duration window) noexcept;

private:
  Clock::duration window_;
  std::size_t cap_;
  std::deque<Clock::time_point> starts_;  // ascending; only the last `cap_` matter
};

}  // namespace sluice::health
