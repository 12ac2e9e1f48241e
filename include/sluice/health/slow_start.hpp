#pragma once
// Slow start: after a server comes (back) into service, its effective weight ramps linearly from
// a floor of 10 % to 100 % over `slow_start`:
//
//   share(t) = clamp((t - since) / slow_start, 10 %, 100 %)       (in thousandths: 100 … 1000)
//
// e.g. slow_start = 30 s: 10 % from 0 to 3 s, 25 % at 7.5 s, 50 % at 15 s, 100 % from 30 s on.
// The floor exists because a share of 0 would send nothing at all: the server would learn nothing
// (a half-open trial needs a request) and smooth weighted round robin would skip it entirely.
// slow_start = 0 disables the ramp: the share is always 100 %.
//
// Not thread-safe: owned by ServerHealth; the share it computes is published through
// Endpoint::set_weight_share(), which balancers read.
#include <cstdint>

#include "sluice/core/clock.hpp"

namespace sluice::health {

class SlowStart {
public:
  static constexpr std::uint32_t full_share = 1000;  // thousandths, = Endpoint::full_weight_share
  static constexpr std::uint32_t floor_share = 100;  // 10 %

  explicit SlowStart(Clock::duration duration) noexcept : duration_(duration) {}

  // The server came into service at `now`; starts (or restarts) the ramp. No-op when disabled.
  void start(Clock::time_point now) noexcept;
  void stop() noexcept { running_ = false; }

  // Ramping at `now`?
  bool active(Clock::time_point now) const noexcept {
    return running_ && now - since_ < duration_;
  }
  std::uint32_t share(Clock::time_point now) const noexcept;
  Clock::time_point since() const noexcept { return since_; }
  Clock::time_point ends_at() const noexcept { return since_ + duration_; }
  Clock::duration duration() const noexcept { return duration_; }
  // How often the share is worth recomputing while ramping: 1 % of the ramp, at least 10 ms.
  Clock::duration step() const noexcept;

  void set_duration(Clock::duration d) noexcept { duration_ = d; }

private:
  Clock::duration duration_;
  Clock::time_point since_{};
  bool running_ = false;
};

}  // namespace sluice::health
