#pragma once
// State shared by every worker thread: the origin's name, the run-time health status and the
// counters reported by /stats. All counters are relaxed atomics: with the default single worker
// they are uncontended, and /stats only needs each value, not a consistent snapshot across them.

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::origin {

class origin_state {
 public:
  explicit origin_state(std::string name);

  const std::string& name() const { return name_; }

  // The default body, "NAME\n".
  const std::string& name_body() const { return name_body_; }

  unsigned health_status() const { return health_status_.load(std::memory_order_relaxed); }
  void set_health_status(unsigned code) { health_status_.store(code, std::memory_order_relaxed); }

  void connection_opened();
  void connection_closed();
  void request_started(bool is_post);
  void request_finished();
  void health_request() { health_requests_.fetch_add(1, std::memory_order_relaxed); }

  // Execution log (--exec-log): one line per request taken, appended with a single write(2) on an
  // O_APPEND descriptor, so that lines from several threads never interleave and a line written
  // is in the file even if the process is SIGKILLed right after. -1 = off.
  void set_exec_log(int fd) { exec_log_fd_ = fd; }
  bool exec_log_enabled() const { return exec_log_fd_ >= 0; }
  void log_execution(std::string_view line) const;

  // --fail-every N: true for every Nth request on the normal route (that response is cut mid-body
  // and its connection closed). Always false when N is 0.
  void set_fail_every(std::uint64_t n) { fail_every_ = n; }
  bool take_failure() {
    return fail_every_ != 0 &&
           (answers_.fetch_add(1, std::memory_order_relaxed) + 1) % fail_every_ == 0;
  }

  // --slow PERCENT:MS: that share of the requests on the normal route wait MS longer (added to
  // any `delay` knob), spread evenly: answer n is slow when floor(n x PERCENT / 100) moves, so 25
  // makes every 4th one slow. 0 ms for the others, and always when PERCENT is 0.
  void set_slow(std::uint64_t percent, std::uint64_t ms) {
    slow_percent_ = percent;
    slow_ms_ = ms;
  }
  std::uint64_t take_slow_delay_ms() {
    if (slow_percent_ == 0) return 0;
    const auto n = slow_answers_.fetch_add(1, std::memory_order_relaxed) + 1;
    return (n * slow_percent_) / 100 != ((n - 1) * slow_percent_) / 100 ? slow_ms_ : 0;
  }

  // The /stats document, serialized.
  std::string stats_json() const;
  // Zeroes the cumulative counters; the gauges (open connections, in flight) stay true, and the
  // high-water mark restarts from the current in-flight count.
  void reset_counters();

 private:
  std::string name_;
  std::string name_body_;
  std::atomic<unsigned> health_status_{200};
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint64_t> connections_{0};
  std::atomic<std::uint64_t> open_connections_{0};
  std::atomic<std::uint64_t> in_flight_{0};
  std::atomic<std::uint64_t> max_in_flight_{0};
  std::atomic<std::uint64_t> health_requests_{0};
  std::atomic<std::uint64_t> post_requests_{0};
  int exec_log_fd_ = -1;
  std::uint64_t fail_every_ = 0;
  std::atomic<std::uint64_t> answers_{0};
  std::uint64_t slow_percent_ = 0;
  std::uint64_t slow_ms_ = 0;
  std::atomic<std::uint64_t> slow_answers_{0};
};

// Counts one request as in flight for as long as it lives, so every exit path (client gone,
// bad body, shutdown) releases it.
class in_flight_scope {
 public:
  in_flight_scope(origin_state& state, bool is_post) : state_(&state) {
    state.request_started(is_post);
  }
  ~in_flight_scope() { state_->request_finished(); }
  in_flight_scope(const in_flight_scope&) = delete;
  in_flight_scope& operator=(const in_flight_scope&) = delete;

 private:
  origin_state* state_;
};

}  // namespace sluice::origin
