#pragma once
// Passive ejection of one server, with back-off and a half-open trial.
//
//   serving ──eject──► ejected ──(until reached)──► half_open ──recover──► serving
//                         ▲                             │
//                         └────────────eject────────────┘   (the trial failed: next level)
//
// The n-th ejection in a row lasts fail_timeout × 2^(n-1), capped at max_ejection_time
// (10 s, 20 s, 40 s, ... 300 s). The level n is not reset by a single successful trial (a server
// that recovers and fails again a minute later keeps backing off); it goes back to 0 once the
// server has been back in service for max_ejection_time without being ejected again.
//
// Not thread-safe: owned by ServerHealth and touched under its lock.
#include <cstdint>

#include "sluice/core/clock.hpp"

namespace sluice::health {

class Ejection {
public:
  enum class Phase : std::uint8_t { serving, ejected, half_open };

  Ejection(Clock::duration fail_timeout, Clock::duration max_ejection_time) noexcept;

  // fail_timeout × 2^(level-1), capped at max_ejection_time; level >= 1.
  static Clock::duration backoff(Clock::duration fail_timeout, Clock::duration max_ejection_time,
                                 unsigned level) noexcept;

  // How long an ejection starting at `now` would last (without starting it).
  Clock::duration next_duration(Clock::time_point now) const noexcept;
  // serving or half_open → ejected until now + next_duration(now). Returns the duration.
  Clock::duration eject(Clock::time_point now) noexcept;
  // ejected → half_open once `now` reaches until(). True if that happened now.
  bool expire(Clock::time_point now) noexcept;
  // half_open → serving: the trial succeeded. No-op in other phases.
  void recover() noexcept;
  // half_open → serving without a verdict (a re-ejection was refused by the pool's guard).
  void abandon_trial() noexcept { recover(); }
  // Any phase → serving, and the back-off starts again from the first level: active checks have
  // decided (rise passing probes, or the server is down by probes and their verdict rules).
  void end() noexcept;

  Phase phase() const noexcept { return phase_; }
  Clock::time_point until() const noexcept { return until_; }
  unsigned level() const noexcept { return level_; }
  std::uint64_t ejections() const noexcept { return ejections_; }

  void set_limits(Clock::duration fail_timeout, Clock::duration max_ejection_time) noexcept;
  // Puts back a state saved by a previous process (runtime/state_file): the back-off level and,
  // when `until` is after `now`, an ejection in place until then.
  void restore(Clock::time_point now, unsigned level, Clock::time_point until) noexcept;

private:
  unsigned level_after(Clock::time_point now) const noexcept;

  Clock::duration fail_timeout_;
  Clock::duration max_ejection_time_;
  Phase phase_ = Phase::serving;
  unsigned level_ = 0;
  Clock::time_point until_{};
  Clock::time_point back_since_{};  // when the last ejection expired
  std::uint64_t ejections_ = 0;
};

const char* to_string(Ejection::Phase phase);

}  // namespace sluice::health
