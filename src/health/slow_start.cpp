#include "sluice/health/slow_start.hpp"

#include <algorithm>
#include <chrono>
#include <limits>

namespace sluice::health {

void SlowStart::start(Clock::time_point now) noexcept {
  if (duration_ <= Clock::duration::zero()) return;
  since_ = now;
  running_ = true;
}

std::uint32_t SlowStart::share(Clock::time_point now) const noexcept {
  if (!active(now)) return full_share;
  const auto elapsed = std::max(now - since_, Clock::duration::zero()).count();
  const auto total = duration_.count();
  // elapsed < total here. Integer arithmetic, so that 15 s of 30 s is exactly 500; the second form
  // only serves ramps longer than ~100 days, where elapsed × 1000 would overflow.
  constexpr auto limit = std::numeric_limits<Clock::duration::rep>::max() / full_share;
  const auto thousandths = total <= limit ? elapsed * full_share / total : elapsed / (total / full_share);
  const auto share = static_cast<std::uint32_t>(thousandths);
  return std::clamp(share, floor_share, full_share);
}

Clock::duration SlowStart::step() const noexcept {
  return std::max<Clock::duration>(duration_ / 100, std::chrono::milliseconds(10));
}

}  // namespace sluice::health
