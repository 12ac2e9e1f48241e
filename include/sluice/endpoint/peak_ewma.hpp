#pragma once
// A server's time to first response byte, as a peak-sensitive exponentially weighted moving
// average (Finagle's and Linkerd's "peak EWMA"): a sample above the estimate replaces it at once,
// so one slow answer makes the server expensive immediately; a sample below it pulls the estimate
// down with the weight 1 - exp(-dt / decay), dt being the time since the previous sample, so
// fast answers lower it over about `decay` of wall time, however many there are.
//
// An estimate whose last sample is older than `decay` is forgotten (estimate() answers none):
// a server that got no traffic for that long (down, drained, ejected, or avoided because it was
// slow) is then treated as new, and `least_time` gives it the upstream's median so that it is
// tried again. The first sample after that starts the average afresh.
//
// Threading: observe() from any worker, estimate() from any thread; lock-free. The stamp is
// exchanged so that each interval between samples weighs once, and the value is a CAS loop so
// that no sample is lost (a lost peak would hide a slow answer). Both live on the endpoint's
// in-flight cache line, which every attempt writes anyway.
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>

#include "sluice/core/clock.hpp"

namespace sluice {

class PeakEwma {
public:
  void observe(Clock::duration sample, Clock::time_point now, Clock::duration decay) noexcept {
    const auto previous = stamp_.exchange(now.time_since_epoch().count(), std::memory_order_relaxed);
    const double dt = static_cast<double>(now.time_since_epoch().count() - previous);
    const double tau = static_cast<double>(std::max<Clock::duration::rep>(decay.count(), 1));
    const bool forgotten = previous == 0 || dt > tau;
    const double keep = forgotten ? 0.0 : std::exp(-std::max(dt, 0.0) / tau);
    const double x = static_cast<double>(std::max<Clock::duration::rep>(sample.count(), 0));
    auto bits = value_.load(std::memory_order_relaxed);
    for (;;) {
      const double old = std::bit_cast<double>(bits);
      const double next = x > old || forgotten ? x : old * keep + x * (1.0 - keep);
      if (value_.compare_exchange_weak(bits, std::bit_cast<std::uint64_t>(next), std::memory_order_relaxed))
        return;
    }
  }

  // The estimate in nanoseconds, or none: never sampled, or not within `decay` of `now`.
  std::optional<double> estimate(Clock::time_point now, Clock::duration decay) const noexcept {
    const auto stamp = stamp_.load(std::memory_order_relaxed);
    if (stamp == 0 || now.time_since_epoch().count() - stamp > decay.count()) return std::nullopt;
    return std::bit_cast<double>(value_.load(std::memory_order_relaxed));
  }

  // The last estimate, however old (metrics); 0 when never sampled.
  double last() const noexcept { return std::bit_cast<double>(value_.load(std::memory_order_relaxed)); }

private:
  std::atomic<std::uint64_t> value_{0};   // a double's bits: 0 is 0.0
  std::atomic<Clock::duration::rep> stamp_{0};      // the last sample's time; 0 = never
};

}  // namespace sluice
