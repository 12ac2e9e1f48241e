#pragma once
// The health of one server: one state machine fed by both sources, active probes and live
// traffic, and the only writer of the server's Endpoint::state() and weight_share().
//
// Parts (each a plain value, tested on its own):
//   Hysteresis     active verdict, rise/fall                                  (hysteresis.hpp)
//   PassiveWindow  max_fails failures within fail_timeout                     (passive_window.hpp)
//   Ejection       ejected → half-open → serving, with back-off               (ejection.hpp)
//   EjectionGuard  max_ejected_percent, shared by the upstream's servers      (ejection_guard.hpp)
//   SlowStart      weight ramp after coming (back) into service               (slow_start.hpp)
//
// The visible state (Endpoint::state()) is, in this order of precedence:
//   down        active checks are on and their verdict is down
//   ejected     passively ejected and the ejection has not expired
//   slow_start  in service, weight still ramping (slow_start > 0)
//   up          otherwise
// Half-open (an expired ejection whose trial is pending) is in service: up or slow_start, with
// HealthStatus::passive_phase == half_open. The ramp starts whenever the server goes from
// down/ejected to in service, so a half-open trial also gets only the floor share at first.
//
// Rules where the sources meet:
//   - Live results are ignored while the server is down or ejected: they come from requests sent
//     before the verdict and say nothing new.
//   - Active checks end ejections (Envoy's outlier detection un-ejects on a successful active
//     check): `rise` consecutive passing probes after an ejection bring the server back and
//     reset its back-off level. Probe failures while ejected still count towards `fall`; once
//     active checks say down, the ejection is over (their verdict rules), so time spent down by
//     probes never doubles the next ejection.
//   - In half-open, whichever comes first decides: a live result or (with active checks) a probe.
//     Success → serving. Failure → ejected again, for twice as long (capped).
//   - Coming up by active checks clears the passive window.
//
// Threads. Every method takes one std::mutex, except live_success() on its fast path:
//   - live_success() reads one atomic flag and returns unless a half-open trial is pending (from an
//     ejection's expiry to the first result after it): no lock, no write, no shared cache line
//     written by the success path.
//   - live_failure() takes the mutex: failures are rare and already slow (a failed connect, a 5xx),
//     and the window, ejection and guard must change together.
// probe_result(), tick(), next_deadline(), reconfigure() and status() are meant for the control
// thread (the prober and the health timer); live_success() and live_failure() for the workers.
// Ejections end only through tick(): the control thread must call it at next_deadline(), and since
// a worker's live_failure() can eject at any moment, either re-read next_deadline() when a worker
// reports an `ejected` transition (post to the control loop) or tick every server periodically
// (every 100 ms is plenty: tick() is one uncontended lock when there is nothing to do).
// Every method returns the transition it caused, if any, for the caller to log and count outside
// the lock; nothing here logs or does I/O.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "sluice/config/config.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/health/ejection.hpp"
#include "sluice/health/ejection_guard.hpp"
#include "sluice/config/fail_on.hpp"
#include "sluice/health/hysteresis.hpp"
#include "sluice/health/passive_window.hpp"
#include "sluice/health/slow_start.hpp"
#include "sluice/endpoint/endpoint.hpp"

namespace sluice::health {

// [upstreams.X.health]: the state-machine part (interval, timeout, jitter and expect_status belong
// to the prober and ProbeSchedule).
struct ActivePolicy {
  unsigned rise = config::defaults::rise;
  unsigned fall = config::defaults::fall;
  bool initially_up = true;  // initial_state = "up"
};

// [upstreams.X.passive] (fail_on is applied by the caller, see fail_on.hpp).
struct PassivePolicy {
  unsigned max_fails = config::defaults::max_fails;  // 0 = never eject
  Clock::duration fail_timeout = config::defaults::fail_timeout;
  Clock::duration max_ejection_time = config::defaults::max_ejection_time;
};

struct HealthPolicy {
  std::optional<ActivePolicy> active;    // nullopt: no active checks, never down
  std::optional<PassivePolicy> passive;  // nullopt: no passive ejection
  Clock::duration slow_start{};           // [upstreams.X] slow_start; 0 = off
};

struct ProbeResult {
  bool passed = false;
  std::string detail;  // why it failed: "connect refused", "status 503 not in 200-399", "timeout"
  Clock::duration latency{};
};

enum class HealthEvent : std::uint8_t {
  went_down,         // active: `fall` consecutive probe failures
  came_up,           // active: `rise` consecutive probe passes
  ejected,           // passive: max_fails failures within fail_timeout
  ejection_refused,  // passive: ejecting would exceed max_ejected_percent; the server stays in
  half_open,         // the ejection expired; the next result decides
  recovered,         // the half-open trial succeeded
  reejected,         // the half-open trial failed: ejected again, for longer
  slow_start_done,   // the weight ramp reached 100 %
  failure_noted,     // passive: the first failure of a window (a notice; no state change)
};

const char* to_string(HealthEvent event);

// One event, with the visible state before and after (equal for e.g. recovered or
// ejection_refused). reason is for logs and the status API:
//   "3 consecutive probe failures: connect refused"      "probe passed 2/2"
//   "3 failures in 10s: 502; ejected for 10s"            "ejection expired: half-open"
struct Transition {
  HealthEvent event;
  ServerState from;
  ServerState to;
  std::string reason;
  Clock::time_point at;
};

struct ProbeRecord {
  bool passed = false;
  std::string detail;
  Clock::duration latency{};
  Clock::time_point at;
};

// A copy of everything, for the admin API.
struct HealthStatus {
  ServerState state = ServerState::up;
  std::string reason;       // of the last change of `state`
  Clock::time_point since;  // time of the last change of `state`
  std::optional<Transition> last_event;

  bool active_checks = false;
  bool active_up = true;
  unsigned health_counter = 0;  // Hysteresis counter, in [0, rise + fall - 1]
  unsigned health_max = 0;
  unsigned consecutive_passes = 0;
  unsigned consecutive_failures = 0;
  std::optional<ProbeRecord> last_probe;

  Ejection::Phase passive_phase = Ejection::Phase::serving;
  unsigned recent_failures = 0;  // within fail_timeout, at most max_fails
  unsigned ejection_level = 0;   // ejections in a row (back-off exponent + 1)
  Clock::time_point ejected_until;
  std::uint64_t ejections = 0;
  std::uint64_t ejections_refused = 0;  // by max_ejected_percent

  std::uint32_t weight_share = Endpoint::full_weight_share;
};

// What a state file (runtime/state_file) keeps of one server across a restart.
struct SavedHealth {
  std::optional<bool> active_up;  // the probes' verdict; nullopt: no active checks
  unsigned ejection_level = 0;    // passive back-off exponent
  Clock::duration ejected_for{};  // ejection time left; 0 = not ejected
  std::optional<Clock::duration> slow_start_elapsed;  // ramping, this far along
};

class ServerHealth {
public:
  // guard may be null (no max_ejected_percent). Sets the endpoint's initial state (up, or down
  // with initial_state = "down") and a full weight share. The endpoint, clock and guard must
  // outlive this object.
  ServerHealth(Endpoint& endpoint, const HealthPolicy& policy,
               std::shared_ptr<EjectionGuard> guard, const Clock& clock);
  // Gives back the guard slot if the server is ejected (it leaves the pool).
  ~ServerHealth();

  ServerHealth(const ServerHealth&) = delete;
  ServerHealth& operator=(const ServerHealth&) = delete;

  // Control thread: the result of one active probe (ignored but recorded without active checks).
  std::optional<Transition> probe_result(const ProbeResult& result);

  // Any worker: one live request succeeded (per FailOn). Lock-free unless a half-open trial is
  // pending, in which case this request is the trial.
  std::optional<Transition> live_success() {
    if (!trial_pending_.load(std::memory_order_acquire)) return std::nullopt;
    return trial_succeeded();
  }
  // Any worker: one live request failed (per FailOn). Takes the lock.
  std::optional<Transition> live_failure(const Failure& failure);

  // Control thread, at next_deadline(): ends expired ejections, advances the slow-start ramp.
  std::optional<Transition> tick();
  // When tick() next has work: an ejection's end, or the next ramp step; time_point::max() if none.
  Clock::time_point next_deadline() const;

  // Control thread, on reload: new parameters for the same server. Keeps the verdicts (an up
  // server stays up under new rise/fall; an ejection keeps its end time) and moves a held guard
  // slot to `guard`.
  void reconfigure(const HealthPolicy& policy, std::shared_ptr<EjectionGuard> guard);
  // Control thread, before the server is published: a server added to a running upstream (by a
  // reload or by DNS) that starts in service ramps in over slow_start, as one coming back does.
  void ramp_in();

  HealthStatus status() const;
  Endpoint& endpoint() const noexcept { return endpoint_; }

  // Control thread (saved_health.cpp). saved(): this server as a state file keeps it.
  // restore(): at start-up, before any probe or request, puts back what a previous process
  // saved; a saved probe verdict replaces initial_state (a server down at stop starts down and
  // needs `rise` passing probes), an ejection resumes for the time it had left.
  SavedHealth saved() const;
  void restore(const SavedHealth& saved);

  // Fleet mode with share_ejections (runtime/fleet_ejections.cpp), control thread.
  // own_ejection(): this server's passive ejections so far (ejections made here, not those
  // applied from the fleet) and, when that count is not `known`, the ejection in place, if any.
  // shared_ejection(): another instance ejected the server until `until`; applied as an
  // ejection of this instance (within max_ejected_percent, ending in a half-open trial) without
  // raising the back-off level. An ejection in place is only ever lengthened.
  struct OwnEjection {
    std::uint64_t ejections = 0;
    bool ejected = false;
    Clock::time_point until;
    std::string reason;
  };
  OwnEjection own_ejection(std::uint64_t known) const;
  std::optional<Transition> shared_ejection(Clock::time_point until, const std::string& reason);

  // Rate limit for one kind of this server's repetitive log lines (failure notices, refused
  // ejections: one limit each): one line per second, with the count of those it held back.
  // Thread-safe, lock-free.
  class LogLimit {
  public:
    // True when a line may be written now; `held_back` is set to the lines dropped since the last.
    bool admit(Clock::time_point now, std::uint32_t& held_back) noexcept;

  private:
    std::atomic<Clock::duration::rep> next_{0};
    std::atomic<std::uint32_t> held_back_{0};
  };
  LogLimit& log_limit(HealthEvent event) const noexcept {
    return event == HealthEvent::ejection_refused ? refusals_log_ : failures_log_;
  }

private:
  struct Outcome {
    HealthEvent event;
    std::string reason;
  };

  std::optional<Transition> trial_succeeded();
  std::optional<Outcome> probe_decides_ejection(const ProbeResult& result);
  Outcome eject(Clock::time_point now, const std::string& cause);
  static std::string refusal(const EjectionGuard::Verdict& verdict, const std::string& cause);
  void release_slot() noexcept;
  void count_if_out() noexcept;
  ServerState compute_state(Clock::time_point now) const noexcept;
  // Recomputes the visible state, starts/stops the ramp, publishes to the endpoint and, given an
  // event, records and returns it.
  std::optional<Transition> settle(Clock::time_point now, std::optional<Outcome> outcome);

  Endpoint& endpoint_;
  const Clock& clock_;

  mutable std::mutex mutex_;  // guards everything below
  HealthPolicy policy_;
  std::shared_ptr<EjectionGuard> guard_;
  bool holds_slot_ = false;  // counted in guard_: ejected, or down by probes
  unsigned passes_since_ejection_ = 0;
  std::uint64_t ejections_refused_ = 0;
  mutable LogLimit failures_log_;
  mutable LogLimit refusals_log_;  // consecutive passing probes while ejected or half-open
  std::optional<Hysteresis> active_;
  PassiveWindow window_;
  Ejection ejection_;
  SlowStart ramp_;
  ServerState state_;
  std::string reason_;
  Clock::time_point since_;
  std::optional<Transition> last_event_;
  std::optional<ProbeRecord> last_probe_;

  // ejection_.phase() == half_open && state_ != down, published for live_success()'s fast path.
  // Own cache line: workers read it on every success; the mutex next door is written by lockers.
  alignas(64) std::atomic<bool> trial_pending_{false};
};

}  // namespace sluice::health
