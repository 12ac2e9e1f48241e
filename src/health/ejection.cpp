#include "sluice/health/ejection.hpp"

#include <algorithm>

namespace sluice::health {
namespace {

constexpr unsigned max_level = 64;  // far beyond any cap; keeps the counter from wrapping

}  // namespace

Ejection::Ejection(Clock::duration fail_timeout, Clock::duration max_ejection_time) noexcept
    : fail_timeout_(fail_timeout), max_ejection_time_(max_ejection_time) {}

Clock::duration Ejection::backoff(Clock::duration fail_timeout, Clock::duration max_ejection_time,
                                  unsigned level) noexcept {
  auto d = std::min(fail_timeout, max_ejection_time);
  // Double step by step rather than shifting, so that no level can overflow the duration.
  for (unsigned i = 1; i < level && d < max_ejection_time; ++i) {
    d = d > max_ejection_time / 2 ? max_ejection_time : d * 2;
  }
  return d;
}

unsigned Ejection::level_after(Clock::time_point now) const noexcept {
  // Back in service (not merely on trial) for max_ejection_time: start over at level 1.
  const bool rested = phase_ == Phase::serving && now - back_since_ >= max_ejection_time_;
  const unsigned base = rested ? 0 : level_;
  return std::min(base + 1, max_level);
}

Clock::duration Ejection::next_duration(Clock::time_point now) const noexcept {
  return backoff(fail_timeout_, max_ejection_time_, level_after(now));
}

Clock::duration Ejection::eject(Clock::time_point now) noexcept {
  level_ = level_after(now);
  const auto d = backoff(fail_timeout_, max_ejection_time_, level_);
  phase_ = Phase::ejected;
  until_ = now + d;
  ++ejections_;
  return d;
}

bool Ejection::expire(Clock::time_point now) noexcept {
  if (phase_ != Phase::ejected || now < until_) return false;
  phase_ = Phase::half_open;
  back_since_ = now;
  return true;
}

void Ejection::recover() noexcept {
  if (phase_ == Phase::half_open) phase_ = Phase::serving;
}

void Ejection::end() noexcept {
  phase_ = Phase::serving;
  level_ = 0;
}

void Ejection::set_limits(Clock::duration fail_timeout, Clock::duration max_ejection_time) noexcept {
  fail_timeout_ = fail_timeout;
  max_ejection_time_ = max_ejection_time;
}

void Ejection::restore(Clock::time_point now, unsigned level, Clock::time_point until) noexcept {
  level_ = std::min(level, max_level);
  if (until > now) {
    phase_ = Phase::ejected;
    until_ = until;
  } else {
    // Back in service from now: the level decays after max_ejection_time, as after an expiry.
    phase_ = Phase::serving;
    back_since_ = now;
  }
}

const char* to_string(Ejection::Phase phase) {
  switch (phase) {
    case Ejection::Phase::serving: return "serving";
    case Ejection::Phase::ejected: return "ejected";
    case Ejection::Phase::half_open: return "half_open";
  }
  return "unknown";
}

}  // namespace sluice::health
