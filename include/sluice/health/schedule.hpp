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
#include <cstdint>
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

}  // namespace sluice::health
