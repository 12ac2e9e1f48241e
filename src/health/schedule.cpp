#include "sluice/health/schedule.hpp"

#include <algorithm>

#include "sluice/core/random.hpp"

namespace sluice::health {
namespace {

Clock::duration scale(Clock::duration d, double factor) noexcept {
  return Clock::duration{static_cast<Clock::duration::rep>(static_cast<double>(d.count()) * factor)};
}

}  // namespace

ProbeSchedule::ProbeSchedule(Clock::duration interval, double jitter, std::uint64_t seed) noexcept
    : interval_(interval), jitter_(std::clamp(jitter, 0.0, 0.5)), state_(seed) {}

double ProbeSchedule::uniform() noexcept {
  return unit_interval(splitmix64(state_));
}

Clock::time_point ProbeSchedule::first(Clock::time_point start) noexcept {
  return start + scale(interval_, uniform());
}

Clock::time_point ProbeSchedule::next(Clock::time_point previous) noexcept {
  return previous + scale(interval_, 1.0 + jitter_ * (2.0 * uniform() - 1.0));
}

std::uint64_t ProbeSchedule::seed_for(std::string_view identity, std::uint64_t base) noexcept {
  // FNV-1a over the identity, then one SplitMix64 round to spread it with the base.
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char c : identity) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  std::uint64_t state = h ^ base;
  return splitmix64(state);
}

Clock::time_point ProbePacer::admit(Clock::time_point wanted) {
  auto t = wanted;
  if (!starts_.empty()) t = std::max(t, starts_.back());
  // With t at or after every recorded start, the window (t - window, t] holds too many exactly
  // when the cap-th latest start is inside it.
  if (starts_.size() >= cap_) t = std::max(t, starts_[starts_.size() - cap_] + window_);
  starts_.push_back(t);
  while (starts_.size() > cap_) starts_.pop_front();
  return t;
}

std::size_t ProbePacer::cap_for(double probes_per_second, Clock::duration window) noexcept {
  const double per_window = probes_per_second * std::chrono::duration<double>(window).count();
  return std::max<std::size_t>(5, static_cast<std::size_t>(std::ceil(2.0 * per_window)));
}

}  // namespace sluice::health
