#pragma once
// One backend server as the data path sees it. Shared by every worker and the control thread:
// everything mutable is an atomic, read by balancers on every pick and written by the health
// machinery, the drain API and the forwarder (in_flight). The object's identity (name, else the
// address) is stable: a reload that keeps the identity keeps this object, so health state,
// counters and pooled connections survive the reload.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>

#include "sluice/core/per_worker.hpp"
#include "sluice/endpoint/peak_ewma.hpp"
#include "sluice/config/config.hpp"
#include "sluice/config/failure.hpp"
#include "sluice/endpoint/outcomes.hpp"

namespace sluice {

enum class ServerState : std::uint8_t {
  up,        // serving
  down,      // active health checks failed
  ejected,   // passive failure tracking took it out
  slow_start,  // back up, effective weight ramping
};

const char* to_string(ServerState state);

namespace health { class ServerHealth; }

// Counters of one worker for one endpoint, on their own cache line. Written only by that worker
// (a plain load + store, no locked instruction), summed by the control thread at scrape.
struct alignas(64) EndpointCounters {
  static constexpr std::size_t buckets = 15;  // request duration histogram, see duration_bounds
  // By source and status class: [1]..[5] the origin's 1xx..5xx: origin_answer_slot(); [6] cut:
  // the origin's head went to the client but its body broke off; [7]..[11] sluice's own answers
  // (errors, `return`, idempotency refusals), 1xx..5xx: own_answer_slot(); [0] cut by the
  // client: it left, or stopped reading for idle_timeout, before the answer was whole.
  static constexpr std::size_t status_classes = 5;  // 1xx..5xx
  static constexpr std::size_t client_cut_slot = 0;
  static constexpr std::size_t origin_answer_slot(unsigned status) noexcept { return status / 100; }
  static constexpr std::size_t cut_slot = client_cut_slot + status_classes + 1;
  static constexpr std::size_t own_answer_slot(unsigned status) noexcept { return cut_slot + status / 100; }
  static constexpr std::size_t response_slots = cut_slot + status_classes + 1;
  std::atomic<std::uint64_t> responses[response_slots]{};
  std::atomic<std::uint64_t> failures{};      // attempts that failed (connect, reset, timeout, bad response)
  // Retries made after an attempt here failed, by health::FailureKind ([0]: a status in `on`).
  std::atomic<std::uint64_t> retries[health::failure_kind_count]{};
  // Retries not made, by RetrySkip (endpoint/outcomes.hpp; [0] `none` stays 0).
  std::atomic<std::uint64_t> retry_skips[retry_skip_count]{};
  std::atomic<std::uint64_t> duration_counts[buckets + 1]{};
  std::atomic<std::uint64_t> duration_sum_us{};
  // Upgrade tunnels ended, by TunnelVerdict (endpoint/outcomes.hpp): [keep] by a peer (close or
  // error), [idle] tunnel_idle_timeout, [drained] tunnel_drain_timeout.
  std::atomic<std::uint64_t> tunnels_closed[tunnel_verdict_count]{};
  // gRPC calls' outcomes by grpc-status (0..16; [16 + 1] any other value, proxy/grpc.hpp):
  // [0] the server's answer, [1] sluice's own.
  static constexpr std::size_t grpc_code_slots = 18;
  std::atomic<std::uint64_t> grpc_codes[2][grpc_code_slots]{};

  // One worker writes each slot: core/per_worker.hpp's single-writer increment.
  static void bump(std::atomic<std::uint64_t>& c, std::uint64_t by = 1) noexcept { add_own(c, by); }
  // An exchange ended: its answer's slot in `responses` and its duration.
  void count_exchange(std::size_t response_slot, std::chrono::microseconds duration) noexcept;
};
// Every status class of both sources has its slot, the last one ends the array.
static_assert(EndpointCounters::origin_answer_slot(599) < EndpointCounters::cut_slot);
static_assert(EndpointCounters::own_answer_slot(599) + 1 == EndpointCounters::response_slots);
// Upper bounds (seconds) of the duration buckets; one more bucket holds the rest.
// Up to past the default response_timeout (30 s), so that a request that ran into it lands in a
// bucket of its own rather than in +Inf with every other slow one.
inline constexpr double duration_bounds[EndpointCounters::buckets] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

inline void EndpointCounters::count_exchange(std::size_t response_slot,
                                             std::chrono::microseconds duration) noexcept {
  bump(responses[response_slot]);
  const double seconds = static_cast<double>(duration.count()) / 1e6;
  std::size_t b = 0;
  while (b < buckets && seconds > duration_bounds[b]) ++b;
  bump(duration_counts[b]);
  bump(duration_sum_us, static_cast<std::uint64_t>(duration.count()));
}

class Endpoint {
public:
  Endpoint(std::string identity, config::HostPort address, boost::asio::ip::tcp::endpoint resolved,
           std::uint32_t weight);

  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // The server's health state machine, fed by probes (control thread) and live results
  // (workers). Set once by the control thread before the endpoint is published; owned here so
  // that it lives exactly as long as any snapshot can reach the endpoint.
  health::ServerHealth& health() const noexcept { return *health_; }
  bool has_health() const noexcept { return health_ != nullptr; }
  void set_health(std::shared_ptr<health::ServerHealth> health);

  // Process-unique, never reused: workers index their connection pools by it.
  std::uint32_t id() const noexcept { return id_; }
  const std::string& identity() const noexcept { return identity_; }
  const config::HostPort& address() const noexcept { return address_; }
  // "host:port" as written in the config; used for the Host of probes and in logs.
  const std::string& address_text() const noexcept { return address_text_; }
  const boost::asio::ip::tcp::endpoint& socket_address() const noexcept { return resolved_; }

  std::uint32_t weight() const noexcept { return weight_.load(std::memory_order_relaxed); }
  void set_weight(std::uint32_t w) noexcept { weight_.store(w, std::memory_order_relaxed); }

  // Slow start (health/slow_start.hpp): the share of weight() this server should get right now,
  // in thousandths: 1000 normally, 100..999 while ramping up after coming (back) into service.
  // Written only by the server's ServerHealth; weighted balancers read it.
  static constexpr std::uint32_t full_weight_share = 1000;
  std::uint32_t weight_share() const noexcept { return weight_share_.load(std::memory_order_relaxed); }
  void set_weight_share(std::uint32_t s) noexcept { weight_share_.store(s, std::memory_order_relaxed); }
  // weight() × weight_share(), i.e. the effective weight in thousandths of a weight unit (weight 3
  // at full share = 3000), so that a weight-1 server ramps as smoothly as a weight-100 one.
  std::uint64_t effective_weight_milli() const noexcept {
    return std::uint64_t{weight()} * weight_share();
  }

  ServerState state() const noexcept { return state_.load(std::memory_order_acquire); }
  void set_state(ServerState s) noexcept { state_.store(s, std::memory_order_release); }
  bool draining() const noexcept { return draining_.load(std::memory_order_acquire); }
  void set_draining(bool d) noexcept { draining_.store(d, std::memory_order_release); }

  // This worker's counters (worker index modulo max_worker_slots).
  static constexpr unsigned max_worker_slots = 64;
  EndpointCounters& counters(unsigned worker) noexcept { return counters_[worker % max_worker_slots]; }
  const EndpointCounters& counters(unsigned worker) const noexcept { return counters_[worker % max_worker_slots]; }
  // One counter, `get(slot)`, summed over the slots of the first `workers` workers (a scrape).
  template <class Get>
  std::uint64_t sum_counters(unsigned workers, Get get) const {
    std::uint64_t total = 0;
    for (unsigned w = 0; w < std::min(workers, max_worker_slots); ++w)
      total += get(counters_[w]).load(std::memory_order_relaxed);
    return total;
  }

  // Drain source, for the admin API: set through the API (survives reloads) or by the file.
  bool drained_by_api() const noexcept { return drained_by_api_.load(std::memory_order_relaxed); }
  void set_drained_by_api(bool b) noexcept { drained_by_api_.store(b, std::memory_order_relaxed); }
  // Probe results, counted by the control thread.
  std::atomic<std::uint64_t> probes_passed{0};
  std::atomic<std::uint64_t> probes_failed{0};

  // May a new request be sent here? (Balancers skip servers for which this is false.)
  bool available() const noexcept {
    const auto s = state();
    return (s == ServerState::up || s == ServerState::slow_start) && !draining();
  }

  // Requests in flight across all workers. The forwarder brackets every attempt with these.
  std::int64_t in_flight() const noexcept { return in_flight_.load(std::memory_order_relaxed); }
  void begin_request() noexcept { in_flight_.fetch_add(1, std::memory_order_relaxed); }
  // begin_request() unless that would exceed max_conns (0 = no cap): the hard cap across workers.
  bool try_begin_request() noexcept {
    const std::int64_t cap = max_conns();
    if (cap == 0) {
      begin_request();
      return true;
    }
    auto current = in_flight_.load(std::memory_order_relaxed);
    while (current < cap)
      if (in_flight_.compare_exchange_weak(current, current + 1, std::memory_order_relaxed)) return true;
    return false;
  }
  void end_request() noexcept { in_flight_.fetch_sub(1, std::memory_order_relaxed); }

  // Upgrade tunnels open to this server across workers (each also counts in in_flight() for its
  // whole life, so that drains wait for it and max_conns caps it).
  std::int64_t tunnels() const noexcept { return tunnels_.load(std::memory_order_relaxed); }
  void begin_tunnel() noexcept { tunnels_.fetch_add(1, std::memory_order_relaxed); }
  void end_tunnel() noexcept { tunnels_.fetch_sub(1, std::memory_order_relaxed); }

  // An upstream with protocol h2 or h2c: the HTTP/2 connections to this server open across
  // workers, and the GOAWAYs they received. Each changes about once per connection.
  std::int64_t h2_connections() const noexcept { return h2_connections_.load(std::memory_order_relaxed); }
  std::uint64_t h2_goaways() const noexcept { return h2_goaways_.load(std::memory_order_relaxed); }
  void h2_connection_opened() noexcept { h2_connections_.fetch_add(1, std::memory_order_relaxed); }
  void h2_connection_closed() noexcept { h2_connections_.fetch_sub(1, std::memory_order_relaxed); }
  void h2_goaway_received() noexcept { h2_goaways_.fetch_add(1, std::memory_order_relaxed); }

  // Time to the first response byte (peak EWMA), fed by the forwarder after each attempt that
  // got one; least_time reads it, /metrics and /api/status show it.
  PeakEwma& first_byte_time() noexcept { return first_byte_time_; }
  const PeakEwma& first_byte_time() const noexcept { return first_byte_time_; }

  // A backup server receives requests only while no primary can take them. Balancers read the
  // flag when they are built (control thread), so a change takes effect at the next snapshot.
  bool backup() const noexcept { return backup_.load(std::memory_order_relaxed); }
  void set_backup(bool b) noexcept { backup_.store(b, std::memory_order_relaxed); }

  // Connections to this server use TLS (the upstream's `tls`, or an "https://" address). Set by
  // the control thread when a snapshot is built; a pooled connection of the other kind is not
  // reused.
  bool tls() const noexcept { return tls_.load(std::memory_order_relaxed); }
  void set_tls(bool t) noexcept { tls_.store(t, std::memory_order_relaxed); }

  // Concurrent request cap across all workers, 0 = unlimited. Balancers skip a server at its cap
  // (a hint); try_begin_request() enforces it.
  std::uint32_t max_conns() const noexcept { return max_conns_.load(std::memory_order_relaxed); }
  void set_max_conns(std::uint32_t m) noexcept { max_conns_.store(m, std::memory_order_relaxed); }
  bool at_limit() const noexcept {
    const auto m = max_conns();
    return m != 0 && in_flight() >= static_cast<std::int64_t>(m);
  }

private:
  static std::atomic<std::uint32_t> next_id_;

  // The only owner. A shared_ptr for its deleter, captured where the object is made: this layer
  // is below health and never sees ServerHealth's definition (docs/architecture.md, Layers).
  std::shared_ptr<health::ServerHealth> health_;
  std::unique_ptr<EndpointCounters[]> counters_{new EndpointCounters[max_worker_slots]};
  std::atomic<bool> drained_by_api_{false};
  const std::uint32_t id_;
  const std::string identity_;
  const config::HostPort address_;
  const std::string address_text_;
  const boost::asio::ip::tcp::endpoint resolved_;
  std::atomic<std::uint32_t> weight_;
  std::atomic<std::uint32_t> weight_share_{full_weight_share};
  std::atomic<ServerState> state_{ServerState::up};
  std::atomic<bool> draining_{false};
  std::atomic<bool> backup_{false};
  std::atomic<bool> tls_{false};
  std::atomic<std::uint32_t> max_conns_{0};
  std::atomic<std::int64_t> h2_connections_{0};
  std::atomic<std::uint64_t> h2_goaways_{0};
  alignas(64) std::atomic<std::int64_t> in_flight_{0};
  std::atomic<std::int64_t> tunnels_{0};  // changes once per tunnel: shares in_flight_'s line
  PeakEwma first_byte_time_;  // written once per answered attempt, beside in_flight_'s writes
};

}  // namespace sluice
