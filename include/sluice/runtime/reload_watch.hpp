#pragma once
// The watch after a reload ([reload], docs/operations.md): for `watch` after a reload, the new
// config's traffic is compared with the window before it, and a clear breach is a verdict to swap
// the previous config back.
//
//   ReloadWatch   pure: cumulative answer counts in, a verdict out, on a Clock (unit-tested on a
//                 ManualClock, tests/runtime/reload_watch_test.cpp)
//   TrafficMeter  turns the per-worker counters the data path keeps anyway (summed on read, as
//                 /metrics does) into one running count that survives reloads changing the servers
//
// Threads: control thread only (its timer reads the counters; nothing is added to a request).
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sluice/config/config.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/runtime/snapshot.hpp"

namespace sluice {

// Answers since start: all of them, and the failed ones (an origin's 5xx; sluice's own error
// answers: 502, 503, 504).
struct TrafficCount {
  std::uint64_t requests = 0;
  std::uint64_t failed = 0;
};

// One upstream's servers from the file (not those from DNS): how many are up or ramping and not
// drained by the file (a drain through the API counts as the server's health), of how many.
struct UpstreamUp {
  std::string upstream;
  std::uint32_t up = 0;
  std::uint32_t total = 0;
};

struct WatchVerdict {
  enum class Kind { applied, too_little_traffic, rolled_back };
  Kind kind = Kind::applied;
  // What the operator reads: "applied: failed share 0.2 % (before 0.1 %) over 30 s",
  // "rolled back: failed share 41.7 % (before 0.1 %) over 30 s".
  std::string text;
};

class ReloadWatch {
public:
  explicit ReloadWatch(const Clock& clock) : clock_(clock) {}

  // The running count, on every tick of the control thread's timer and right before a reload
  // applies. Counts are kept for `keep` (the window before a reload is as long as its watch).
  void record(TrafficCount total, Clock::duration keep);

  // A reload was applied (its count recorded just before): watch it for `settings.watch`.
  // `up_before`: each upstream's servers in the config it replaced, as the reload found them.
  void begin(const config::ReloadSection& settings, std::vector<UpstreamUp> up_before);
  bool watching() const noexcept { return watching_; }
  // A newer reload (or a rollback) replaces the one watched: no verdict for it.
  void cancel() noexcept { watching_ = false; }

  // After record(): the verdict once there is one (a breach, or the watch over), else nullopt.
  // Ends the watch when it answers.
  std::optional<WatchVerdict> judge(const std::vector<UpstreamUp>& up_now);

private:
  struct Sample {
    Clock::time_point at;
    TrafficCount total;
  };
  // The newest sample at or before `at` (else the oldest kept).
  const Sample& at_or_before(Clock::time_point at) const;
  std::optional<std::string> up_breach(const std::vector<UpstreamUp>& up_now) const;

  const Clock& clock_;
  std::deque<Sample> samples_;
  bool watching_ = false;
  config::ReloadSection settings_;
  std::vector<UpstreamUp> up_before_;
  Sample start_;
  double before_share_ = 0;  // failed share of the window before the reload
};

// The running count of answers across reloads: per server (by Endpoint::id, never reused) and
// per upstream's unserved answers (by name, kept across reloads), the change since the previous
// read is added; a server first seen counts from zero (a reload's new servers start at zero).
class TrafficMeter {
public:
  TrafficCount read(const Snapshot& snapshot, unsigned workers);

private:
  struct Seen {
    TrafficCount last;
    std::uint64_t read = 0;  // the read that last found it
  };
  void add(Seen& seen, const TrafficCount& now);

  std::uint64_t reads_ = 0;
  TrafficCount total_;
  std::unordered_map<std::uint32_t, Seen> servers_;
  std::unordered_map<std::string, Seen> unserved_;
};

// Each upstream's servers up, as ReloadWatch judges them (UpstreamUp).
std::vector<UpstreamUp> servers_up(const Snapshot& snapshot);

// The version of a config file a rollback refuses again: a digest of the text it was parsed
// from (16 hex digits), computed the same way by `sluice check --diff-running`.
std::string config_fingerprint(const std::string& text);

}  // namespace sluice
