#pragma once
// Passive failure window: "max_fails failures within fail_timeout". Keeps only the times of the
// last max_fails failures (a ring), so memory is bounded whatever the failure rate, and a check is
// one comparison: the window is full when the oldest of the last max_fails failures is at most
// fail_timeout old. Successes are not recorded and do not reset the window (they are the hot path).
//
// 3 failures at 0 s, 5 s and 10 s with fail_timeout 10 s fill the window (the span is inclusive);
// 3 failures at 0 s, 5.5 s and 11 s do not, and neither does the next one unless it comes within
// 10 s of the 5.5 s failure.
//
// Not thread-safe: owned by ServerHealth and touched under its lock, only on failures.
#include <cstddef>
#include <vector>

#include "sluice/core/clock.hpp"

namespace sluice::health {

class PassiveWindow {
public:
  // max_fails 0 disables the window (record() never reports full).
  PassiveWindow(unsigned max_fails, Clock::duration fail_timeout);

  // Records a failure at `now` (callers pass non-decreasing times). True when this failure makes
  // max_fails failures within fail_timeout.
  bool record(Clock::time_point now);

  // Failures recorded within fail_timeout before `now`, at most max_fails.
  unsigned count(Clock::time_point now) const noexcept;
  void clear() noexcept { size_ = 0; }

  unsigned max_fails() const noexcept { return static_cast<unsigned>(ring_.size()); }
  Clock::duration fail_timeout() const noexcept { return fail_timeout_; }

private:
  std::vector<Clock::time_point> ring_;  // max_fails slots, allocated once
  std::size_t next_ = 0;                 // slot the next failure goes to (= oldest when full)
  std::size_t size_ = 0;
  Clock::duration fail_timeout_;
};

}  // namespace sluice::health
