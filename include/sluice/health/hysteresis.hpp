#pragma once
// Rise/fall hysteresis for active checks: HAProxy's single health counter (src/check.c,
// set_server_check_status), so that one flapping probe does not flap the server.
//
// The counter h lives in [0, rise + fall - 1]; the verdict is "up" while h >= rise.
//   pass: h += 1 (saturating); if h >= rise, h jumps to rise + fall - 1 ("fully up").
//   fail: h -= 1 (saturating); if h < rise, h drops to 0 ("fully down").
// So a server that is up goes down after exactly `fall` consecutive failures (any pass in between
// refills the counter), and a server that is down comes up after exactly `rise` consecutive passes
// (any failure empties it). A server that fails every other probe never changes state.
//
// Not thread-safe: a plain value, owned by ServerHealth and touched under its lock.
#include <cstdint>

namespace sluice::health {

class Hysteresis {
public:
  // rise and fall are at least 1 (0 is read as 1). initially_up starts fully up (h = max), so the
  // first `fall` failures are needed to go down; otherwise fully down (h = 0).
  Hysteresis(unsigned rise, unsigned fall, bool initially_up) noexcept;

  // Feeds one probe result; returns true when the verdict (up()) changed.
  bool record(bool passed) noexcept;

  bool up() const noexcept { return counter_ >= rise_; }
  unsigned counter() const noexcept { return counter_; }
  unsigned max() const noexcept { return rise_ + fall_ - 1; }
  unsigned rise() const noexcept { return rise_; }
  unsigned fall() const noexcept { return fall_; }

  // Streaks of identical results, for status pages and reason strings. Independent of the
  // counter's clamping: ten passes in a row report 10.
  unsigned consecutive_passes() const noexcept { return passes_; }
  unsigned consecutive_failures() const noexcept { return failures_; }

private:
  unsigned rise_;
  unsigned fall_;
  unsigned counter_;
  unsigned passes_ = 0;
  unsigned failures_ = 0;
};

}  // namespace sluice::health
