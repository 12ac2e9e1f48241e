// ServerHealth's part in the state file (runtime/state_file): what is saved of a server, and
// putting it back in a new process.
#include "sluice/health/server_health.hpp"

namespace sluice::health {

SavedHealth ServerHealth::saved() const {
  std::lock_guard lock(mutex_);
  const auto now = clock_.now();
  SavedHealth s;
  if (active_) s.active_up = active_->up();
  s.ejection_level = ejection_.level();
  if (ejection_.phase() == Ejection::Phase::ejected && ejection_.until() > now)
    s.ejected_for = ejection_.until() - now;
  if (ramp_.active(now)) s.slow_start_elapsed = now - ramp_.since();
  return s;
}

void ServerHealth::restore(const SavedHealth& saved) {
  std::lock_guard lock(mutex_);
  const auto now = clock_.now();
  // A verdict saved without active checks configured now (or the reverse) says nothing.
  if (active_ && saved.active_up) active_.emplace(active_->rise(), active_->fall(), *saved.active_up);
  if (policy_.passive) {
    // The ejection resumes only within max_ejected_percent, like any ejection.
    bool ejected = saved.ejected_for > Clock::duration::zero();
    if (ejected && guard_) {
      ejected = guard_->try_eject().allowed;
      holds_slot_ = ejected;
    }
    ejection_.restore(now, saved.ejection_level, ejected ? now + saved.ejected_for : now);
  }
  const auto before = state_;
  if (saved.slow_start_elapsed) ramp_.start(now - *saved.slow_start_elapsed);
  // A ramp saved midway resumes where it was (settle() starts one only on a change of state,
  // and stops it if the server is restored down or ejected).
  settle(now, std::nullopt);
  if (state_ != before) {
    since_ = now;
    reason_ = "restored: saved at the last stop or handed over by an upgrade";
  }
}

}  // namespace sluice::health
