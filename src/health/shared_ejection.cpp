// ServerHealth's part in fleet mode's shared ejections (runtime/fleet_ejections.cpp): what this
// instance ejected, for the fleet, and an ejection made by another instance, applied here.
#include "sluice/health/server_health.hpp"

namespace sluice::health {

ServerHealth::OwnEjection ServerHealth::own_ejection(std::uint64_t known) const {
  std::lock_guard lock(mutex_);
  OwnEjection out;
  out.ejections = ejection_.ejections();
  if (out.ejections == known || ejection_.phase() != Ejection::Phase::ejected) return out;
  out.ejected = true;
  out.until = ejection_.until();
  out.reason = reason_;
  return out;
}

std::optional<Transition> ServerHealth::shared_ejection(Clock::time_point until, const std::string& reason) {
  std::lock_guard lock(mutex_);
  const auto now = clock_.now();
  // Passive checks off here, or the probes say down (their verdict rules): nothing to eject.
  if (!policy_.passive || window_.max_fails() == 0 || until <= now || state_ == ServerState::down)
    return std::nullopt;
  if (ejection_.phase() == Ejection::Phase::ejected) {
    if (until > ejection_.until()) ejection_.restore(now, ejection_.level(), until);
    return std::nullopt;
  }
  if (guard_) {
    const auto verdict = guard_->try_eject();
    if (!verdict.allowed) {
      ++ejections_refused_;
      return Transition{HealthEvent::ejection_refused, state_, state_, refusal(verdict, reason), now};
    }
    holds_slot_ = true;
  }
  // The level stays: the instance that ejected keeps the back-off and publishes each ejection.
  ejection_.restore(now, ejection_.level(), until);
  window_.clear();
  passes_since_ejection_ = 0;
  return settle(now, Outcome{HealthEvent::ejected, reason});
}

}  // namespace sluice::health
