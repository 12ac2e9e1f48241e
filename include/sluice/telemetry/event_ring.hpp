#pragma once
// The dashboard's timeline: the last N operational events (health transitions, drains, reloads
// with their result), each with a sequence number so that a poller asks only for what is new.
//
// Threads: any. Health transitions are recorded by workers (passive results) and by the control
// thread (probes, ticks, drains, reloads), so push() and since() take one mutex. Events are rare
// (a state change, an operator action), never one per request: the lock is never on the hot path.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/core/clock.hpp"

namespace sluice::telemetry {

struct Event {
  std::uint64_t seq = 0;  // 1, 2, ... in push order
  Clock::time_point at;
  std::string kind;  // "health", "drain", "reload"
  std::string upstream;
  std::string server;
  std::string text;  // "up -> down: 3 consecutive probe failures: connect refused"
};

class EventRing {
public:
  explicit EventRing(std::size_t capacity = 50);

  // Records an event at `at`, dropping the oldest beyond capacity; returns its seq.
  std::uint64_t push(std::string_view kind, std::string_view upstream, std::string_view server,
                     std::string_view text, Clock::time_point at);

  // The kept events with seq > after, oldest first (after = 0: all of them).
  std::vector<Event> since(std::uint64_t after) const;
  std::uint64_t last_seq() const;

private:
  const std::size_t capacity_;
  mutable std::mutex mutex_;  // guards below
  std::deque<Event> events_;
  std::uint64_t last_seq_ = 0;
};

// The process's timeline, fed by health::log_transition and the runtime, read by the admin API.
EventRing& events();

}  // namespace sluice::telemetry
