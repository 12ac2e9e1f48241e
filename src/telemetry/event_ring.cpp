#include "sluice/telemetry/event_ring.hpp"

#include <stdexcept>

namespace sluice::telemetry {

EventRing::EventRing(std::size_t capacity) : capacity_(capacity) {
  if (capacity == 0) throw std::invalid_argument("EventRing capacity must be > 0");
}

std::uint64_t EventRing::push(std::string_view kind, std::string_view upstream,
                              std::string_view server, std::string_view text,
                              Clock::time_point at) {
  Event e{0, at, std::string(kind), std::string(upstream), std::string(server), std::string(text)};
  std::lock_guard lock(mutex_);
  e.seq = ++last_seq_;
  if (events_.size() == capacity_) events_.pop_front();
  events_.push_back(std::move(e));
  return last_seq_;
}

std::vector<Event> EventRing::since(std::uint64_t after) const {
  std::lock_guard lock(mutex_);
  std::vector<Event> out;
  for (const auto& e : events_)
    if (e.seq > after) out.push_back(e);
  return out;
}

std::uint64_t EventRing::last_seq() const {
  std::lock_guard lock(mutex_);
  return last_seq_;
}

EventRing& events() {
  static EventRing ring(50);
  return ring;
}

}  // namespace sluice::telemetry
