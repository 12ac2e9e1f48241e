#include "origin_state.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <unistd.h>

namespace sluice::origin {

namespace {
constexpr auto relaxed = std::memory_order_relaxed;
}

origin_state::origin_state(std::string name) : name_(std::move(name)), name_body_(name_ + "\n") {}

void origin_state::connection_opened() {
  connections_.fetch_add(1, relaxed);
  open_connections_.fetch_add(1, relaxed);
}

void origin_state::connection_closed() { open_connections_.fetch_sub(1, relaxed); }

void origin_state::request_started(bool is_post) {
  requests_.fetch_add(1, relaxed);
  if (is_post) post_requests_.fetch_add(1, relaxed);
  const auto now = in_flight_.fetch_add(1, relaxed) + 1;
  // The load almost always shows a mark at or above `now`, so the common path is one load.
  auto mark = max_in_flight_.load(relaxed);
  while (mark < now && !max_in_flight_.compare_exchange_weak(mark, now, relaxed)) {
  }
}

void origin_state::log_execution(std::string_view line) const {
  // Best effort: a full disk must not stop the origin. One write, no retry on a short write
  // (lines are far below PIPE_BUF, so the kernel writes them whole).
  [[maybe_unused]] const auto n = ::write(exec_log_fd_, line.data(), line.size());
}

void origin_state::request_finished() { in_flight_.fetch_sub(1, relaxed); }

std::string origin_state::stats_json() const {
  boost::json::object o;
  o["name"] = name_;
  o["requests"] = requests_.load(relaxed);
  o["connections"] = connections_.load(relaxed);
  o["open_connections"] = open_connections_.load(relaxed);
  o["in_flight"] = in_flight_.load(relaxed);
  o["max_in_flight"] = max_in_flight_.load(relaxed);
  o["health_requests"] = health_requests_.load(relaxed);
  o["post_requests"] = post_requests_.load(relaxed);
  o["health_status"] = health_status_.load(relaxed);
  return boost::json::serialize(o);
}

void origin_state::reset_counters() {
  requests_.store(0, relaxed);
  connections_.store(0, relaxed);
  health_requests_.store(0, relaxed);
  post_requests_.store(0, relaxed);
  max_in_flight_.store(in_flight_.load(relaxed), relaxed);
}

}  // namespace sluice::origin
