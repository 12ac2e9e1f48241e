#include "sluice/health/server_health.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "sluice/config/units.hpp"

namespace sluice::health {

namespace {

constexpr std::string_view initial_up = "initial state up";

std::string format(Clock::duration d) {
  return config::format_duration(std::chrono::duration_cast<config::Duration>(d));
}

bool in_service(ServerState s) noexcept {
  return s == ServerState::up || s == ServerState::slow_start;
}

std::string with_detail(std::string head, const std::string& detail) {
  if (!detail.empty()) head += ": " + detail;
  return head;
}

PassivePolicy passive_or_off(const HealthPolicy& p) {
  return p.passive.value_or(PassivePolicy{.max_fails = 0});
}

}  // namespace

const char* to_string(HealthEvent event) {
  switch (event) {
    case HealthEvent::went_down: return "went_down";
    case HealthEvent::came_up: return "came_up";
    case HealthEvent::ejected: return "ejected";
    case HealthEvent::ejection_refused: return "ejection_refused";
    case HealthEvent::half_open: return "half_open";
    case HealthEvent::recovered: return "recovered";
    case HealthEvent::reejected: return "reejected";
    case HealthEvent::slow_start_done: return "slow_start_done";
    case HealthEvent::failure_noted: return "failure";
  }
  return "unknown";
}

ServerHealth::ServerHealth(Endpoint& endpoint, const HealthPolicy& policy,
                           std::shared_ptr<EjectionGuard> guard, const Clock& clock)
    : endpoint_(endpoint),
      clock_(clock),
      policy_(policy),
      guard_(std::move(guard)),
      window_(passive_or_off(policy).max_fails, passive_or_off(policy).fail_timeout),
      ejection_(passive_or_off(policy).fail_timeout, passive_or_off(policy).max_ejection_time),
      ramp_(policy.slow_start) {
  if (policy.active) {
    active_.emplace(policy.active->rise, policy.active->fall, policy.active->initially_up);
  }
  const auto now = clock_.now();
  // No ramp at start-up: every server starts together, so there is nothing to protect it from.
  state_ = compute_state(now);
  since_ = now;
  reason_ = state_ == ServerState::down
                ? "initial state down: waiting for " + std::to_string(policy.active->rise) +
                      " passing probes"
                : std::string(initial_up);
  endpoint_.set_weight_share(Endpoint::full_weight_share);
  endpoint_.set_state(state_);
  count_if_out();
}

ServerHealth::~ServerHealth() { release_slot(); }

void ServerHealth::ramp_in() {
  const auto now = clock_.now();
  if (!in_service(state_)) return;  // initial_state = "down": the ramp starts when it comes up
  ramp_.start(now);
  state_ = compute_state(now);
  if (state_ == ServerState::slow_start) reason_ = "added to a running upstream: slow start";
  endpoint_.set_weight_share(ramp_.share(now));
  endpoint_.set_state(state_);
}

bool ServerHealth::LogLimit::admit(Clock::time_point now, std::uint32_t& held_back) noexcept {
  const auto t = now.time_since_epoch().count();
  auto next = next_.load(std::memory_order_relaxed);
  if (t < next || !next_.compare_exchange_strong(next, t + std::chrono::nanoseconds(std::chrono::seconds(1)).count(),
                                                 std::memory_order_relaxed)) {
    held_back_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  held_back = held_back_.exchange(0, std::memory_order_relaxed);
  return true;
}

void ServerHealth::release_slot() noexcept {
  if (holds_slot_ && guard_) guard_->release();
  holds_slot_ = false;
}

ServerState ServerHealth::compute_state(Clock::time_point now) const noexcept {
  if (active_ && !active_->up()) return ServerState::down;
  if (ejection_.phase() == Ejection::Phase::ejected) return ServerState::ejected;
  if (ramp_.active(now)) return ServerState::slow_start;
  return ServerState::up;
}

// A server out for health reasons, ejected or down by probes, holds a slot of
// max_ejected_percent, so that a passive ejection cannot take out the servers still serving.
// Passive ejections take theirs within the limit (eject()); going down is never limited, so its
// slot is taken whatever the count.
void ServerHealth::count_if_out() noexcept {
  const bool out = ejection_.phase() == Ejection::Phase::ejected || (active_ && !active_->up());
  if (out && !holds_slot_ && guard_) {
    guard_->adopt();
    holds_slot_ = true;
  } else if (!out) {
    release_slot();
  }
}

std::optional<Transition> ServerHealth::settle(Clock::time_point now,
                                               std::optional<Outcome> outcome) {
  count_if_out();
  const auto before = state_;
  const bool available = (!active_ || active_->up()) &&
                         ejection_.phase() != Ejection::Phase::ejected;
  if (available && !in_service(before)) ramp_.start(now);
  if (!available) ramp_.stop();
  state_ = compute_state(now);
  // Store only changes: balancers on every worker read these cache lines on every pick.
  if (const auto share = ramp_.share(now); endpoint_.weight_share() != share) {
    endpoint_.set_weight_share(share);
  }
  if (endpoint_.state() != state_) endpoint_.set_state(state_);
  const bool trial = ejection_.phase() == Ejection::Phase::half_open && state_ != ServerState::down;
  if (trial_pending_.load(std::memory_order_relaxed) != trial) {
    trial_pending_.store(trial, std::memory_order_release);
  }
  // The ramp can end under any input (a probe, a live result): that is a transition too, and it
  // gets its line and its reason.
  if (!outcome && before == ServerState::slow_start && state_ == ServerState::up)
    outcome = Outcome{HealthEvent::slow_start_done, "slow start done: full weight"};
  if (!outcome) return std::nullopt;
  if (state_ != before) {
    since_ = now;
    reason_ = outcome->reason;
  }
  last_event_ = Transition{outcome->event, before, state_, std::move(outcome->reason), now};
  return last_event_;
}

std::string ServerHealth::refusal(const EjectionGuard::Verdict& verdict, const std::string& cause) {
  return "ejection refused: " + std::to_string(verdict.ejected_after) + " of " + std::to_string(verdict.pool_size) +
         " servers would be ejected (max_ejected_percent " + std::to_string(verdict.max_percent) + "); " + cause;
}

ServerHealth::Outcome ServerHealth::eject(Clock::time_point now, const std::string& cause) {
  const bool trial = ejection_.phase() == Ejection::Phase::half_open;
  if (guard_) {
    const auto verdict = guard_->try_eject();
    if (!verdict.allowed) {
      // The server stays in service; a pending trial has nothing left to decide.
      ejection_.abandon_trial();
      ++ejections_refused_;
      return {HealthEvent::ejection_refused, refusal(verdict, cause)};
    }
    holds_slot_ = true;
  }
  const auto duration = ejection_.eject(now);
  window_.clear();
  passes_since_ejection_ = 0;
  std::string reason = cause + "; ejected for " + format(duration);
  if (ejection_.level() > 1) reason += " (ejection " + std::to_string(ejection_.level()) + " in a row)";
  return {trial ? HealthEvent::reejected : HealthEvent::ejected, std::move(reason)};
}

std::optional<Transition> ServerHealth::probe_result(const ProbeResult& result) {
  std::lock_guard lock(mutex_);
  const auto now = clock_.now();
  last_probe_ = ProbeRecord{result.passed, result.detail, result.latency, now};
  if (!active_) return std::nullopt;

  const bool flipped = active_->record(result.passed);
  auto trial = probe_decides_ejection(result);
  // A server up from the start says why once its probes have spoken, not "initial state up"
  // for as long as it stays up.
  if (!flipped && result.passed && active_->up() && reason_ == initial_up) reason_ = "probes passing";
  if (!flipped) return settle(now, std::move(trial));

  Outcome verdict;
  if (active_->up()) {
    window_.clear();  // a fresh start for the passive side too
    verdict = {HealthEvent::came_up, "probe passed " + std::to_string(active_->rise()) + "/" +
                                         std::to_string(active_->rise())};
  } else {
    const auto n = active_->consecutive_failures();
    verdict = {HealthEvent::went_down,
               with_detail(n == 1 ? std::string("1 probe failure")
                                  : std::to_string(n) + " consecutive probe failures",
                           result.detail)};
  }
  if (trial) verdict.reason += " (" + trial->reason + ")";
  return settle(now, std::move(verdict));
}

// What a probe says about an ejection in progress, under the lock. Active checks end it: once
// they say down (their verdict rules from then on, and the time down does not count as a failed
// trial), or after `rise` consecutive passes. Otherwise a half-open trial is decided by whichever
// comes first: a live request or this probe.
std::optional<ServerHealth::Outcome> ServerHealth::probe_decides_ejection(const ProbeResult& result) {
  if (ejection_.phase() == Ejection::Phase::serving) return std::nullopt;
  passes_since_ejection_ = result.passed ? passes_since_ejection_ + 1 : 0;
  if (!active_->up() || passes_since_ejection_ >= active_->rise()) {
    const bool passed = active_->up();
    ejection_.end();
    window_.clear();
    // Its place in max_ejected_percent follows in settle(): kept while probes say down (still
    // out of the pool), given back once they passed.
    if (!passed) return std::nullopt;  // the went_down verdict says it
    return Outcome{HealthEvent::recovered, "probe passed " + std::to_string(active_->rise()) + "/" +
                                               std::to_string(active_->rise()) +
                                               ": ejection ended by active checks"};
  }
  if (ejection_.phase() != Ejection::Phase::half_open) return std::nullopt;
  if (result.passed) {
    ejection_.recover();
    return Outcome{HealthEvent::recovered, "half-open probe passed"};
  }
  return eject(clock_.now(), with_detail("half-open probe failed", result.detail));
}

std::optional<Transition> ServerHealth::trial_succeeded() {
  std::lock_guard lock(mutex_);
  if (ejection_.phase() != Ejection::Phase::half_open || state_ == ServerState::down) {
    return std::nullopt;  // another thread's result decided first
  }
  ejection_.recover();
  return settle(clock_.now(), Outcome{HealthEvent::recovered, "half-open request succeeded"});
}

std::optional<Transition> ServerHealth::live_failure(const Failure& failure) {
  std::lock_guard lock(mutex_);
  if (window_.max_fails() == 0) return std::nullopt;
  // Stragglers sent before the verdict: they tell nothing new.
  if (state_ == ServerState::down || ejection_.phase() == Ejection::Phase::ejected) {
    return std::nullopt;
  }
  // The time is read under the lock, so the window sees non-decreasing times from all workers.
  const auto now = clock_.now();
  if (ejection_.phase() == Ejection::Phase::half_open) {
    window_.record(now);
    return settle(now, eject(now, "half-open request failed: " + describe_live(failure)));
  }
  if (!window_.record(now)) {
    // The first failure of a window is worth a line at info (an operator sees a server start to
    // fail before it is ejected); the caller rate-limits it. Not a state change: not recorded.
    if (window_.count(now) != 1) return std::nullopt;
    return Transition{HealthEvent::failure_noted, state_, state_,
                      "failure 1 of " + std::to_string(window_.max_fails()) + " in " +
                          format(window_.fail_timeout()) + ": " + describe_live(failure),
                      now};
  }
  const auto cause = std::to_string(window_.max_fails()) + " failures in " +
                     format(window_.fail_timeout()) + ": " + describe_live(failure);
  return settle(now, eject(now, cause));
}

std::optional<Transition> ServerHealth::tick() {
  std::lock_guard lock(mutex_);
  const auto now = clock_.now();
  if (ejection_.expire(now)) {
    return settle(now, Outcome{HealthEvent::half_open, "ejection expired: half-open"});
  }
  if (state_ == ServerState::slow_start && !ramp_.active(now)) {
    return settle(now, Outcome{HealthEvent::slow_start_done,
                               "slow start complete after " + format(ramp_.duration())});
  }
  return settle(now, std::nullopt);  // a ramp step: publish the new share
}

Clock::time_point ServerHealth::next_deadline() const {
  std::lock_guard lock(mutex_);
  auto deadline = Clock::time_point::max();
  if (ejection_.phase() == Ejection::Phase::ejected) deadline = ejection_.until();
  const auto now = clock_.now();
  if (state_ == ServerState::slow_start) {
    deadline = std::min({deadline, now + ramp_.step(), ramp_.ends_at()});
  }
  return deadline;
}

void ServerHealth::reconfigure(const HealthPolicy& policy, std::shared_ptr<EjectionGuard> guard) {
  std::lock_guard lock(mutex_);
  const auto now = clock_.now();
  if (!policy.active) {
    active_.reset();
  } else if (!active_ || active_->rise() != policy.active->rise ||
             active_->fall() != policy.active->fall) {
    // A server with a verdict keeps it; one that had no active checks starts as configured.
    const bool up = active_ ? active_->up() : policy.active->initially_up;
    active_.emplace(policy.active->rise, policy.active->fall, up);
  }

  const auto passive = passive_or_off(policy);
  const auto old_passive = passive_or_off(policy_);
  if (passive.max_fails != old_passive.max_fails || passive.fail_timeout != old_passive.fail_timeout) {
    window_ = PassiveWindow(passive.max_fails, passive.fail_timeout);
  }
  ejection_.set_limits(passive.fail_timeout, passive.max_ejection_time);

  if (guard != guard_) {
    if (holds_slot_) {
      if (guard_) guard_->release();
      if (guard) guard->adopt();  // the ejection in place moves to the new pool as it is
      holds_slot_ = guard != nullptr;
    }
    guard_ = std::move(guard);
  }
  if (passive.max_fails == 0 && ejection_.phase() != Ejection::Phase::serving) {
    // Passive checks were turned off: nothing will ever end this ejection but this (settle()
    // gives its slot back).
    ejection_ = Ejection(passive.fail_timeout, passive.max_ejection_time);
  }
  ramp_.set_duration(policy.slow_start);
  policy_ = policy;
  settle(now, std::nullopt);
}

HealthStatus ServerHealth::status() const {
  std::lock_guard lock(mutex_);
  const auto now = clock_.now();
  HealthStatus s;
  s.state = state_;
  s.reason = reason_;
  s.since = since_;
  s.last_event = last_event_;
  s.active_checks = active_.has_value();
  if (active_) {
    s.active_up = active_->up();
    s.health_counter = active_->counter();
    s.health_max = active_->max();
    s.consecutive_passes = active_->consecutive_passes();
    s.consecutive_failures = active_->consecutive_failures();
  }
  s.last_probe = last_probe_;
  s.passive_phase = ejection_.phase();
  s.recent_failures = window_.count(now);
  s.ejection_level = ejection_.level();
  s.ejected_until = ejection_.until();
  s.ejections = ejection_.ejections();
  s.ejections_refused = ejections_refused_;
  s.weight_share = endpoint_.weight_share();
  return s;
}

}  // namespace sluice::health
