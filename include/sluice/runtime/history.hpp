#pragma once
// The dashboard's memory of the last minutes, sampled once a second on the control thread from
// the counters the workers already keep (per-worker slots summed on read, as /metrics does):
// nothing is added to the request path.
//
//   per upstream: requests/s, errors/s and p99 latency of each of the last 300 seconds (charts)
//   per server:   its cumulative counters at each of the last 11 samples, from which a row's
//                 requests/s, error rate and p50/p99 over the last 10 s are computed on read
//
// Threads: control thread only (the sampling timer and the admin listener both run there).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "sluice/runtime/snapshot.hpp"
#include "sluice/telemetry/sample_ring.hpp"

namespace sluice {

// Cumulative counters of one server (or of an upstream's answers no server gave), all workers.
struct Totals {
  std::uint64_t requests = 0;
  std::uint64_t errors = 0;  // sluice's own error answers (502, 504, ...) and origin 5xx
  std::uint64_t retries = 0;
  std::array<std::uint64_t, EndpointCounters::buckets + 1> durations{};

  Totals& operator+=(const Totals& other);
  Totals& operator-=(const Totals& other);  // a later total minus an earlier one
  friend Totals operator-(Totals a, const Totals& b) { return a -= b; }
};

// Adds one worker slot's counters to `into`.
void add_slot(Totals& into, const EndpointCounters& slot);
Totals totals_of(const Endpoint& endpoint, unsigned workers);

// The q-quantile (0 < q < 1) of durations counted in duration_bounds buckets, in milliseconds,
// linear within the bucket it falls in (a request in the last, unbounded bucket counts as 5 s);
// nullopt with no requests.
std::optional<double> quantile_ms(const std::array<std::uint64_t, EndpointCounters::buckets + 1>& counts,
                                  double q);

// One second of one upstream.
struct UpstreamSecond {
  std::uint64_t tick = 0;
  std::uint64_t requests = 0;
  std::uint64_t errors = 0;
  std::optional<double> p99_ms;
};

// A server's row figures over the last (up to) 10 s.
struct ServerRates {
  double rps = 0;
  double error_rate = 0;  // errors / requests, 0 with no requests
  std::optional<double> p50_ms;
  std::optional<double> p99_ms;
  std::uint64_t retries = 0;  // since start (cumulative)
  std::uint32_t pooled = 0;   // idle keep-alive connections, all workers, as last counted
};

class History {
public:
  static constexpr std::size_t chart_seconds = 300;
  static constexpr std::size_t rate_window = 10;

  // Takes one sample of every server and upstream in `snapshot` (call once a second). Servers and
  // upstreams no longer in it are forgotten.
  void sample(const Snapshot& snapshot, unsigned workers);

  // Samples taken so far; the newest sample's tick.
  std::uint64_t tick() const noexcept { return tick_; }
  ServerRates rates(const Endpoint& endpoint) const;
  // nullptr if `upstream` was never sampled.
  const telemetry::SampleRing<UpstreamSecond>* seconds(const std::string& upstream) const;
  // A worker's latest count of its pooled connections by endpoint id (Worker::count_pooled).
  void set_pooled(std::size_t worker, std::vector<std::uint32_t> by_endpoint);

private:
  struct ServerSeries {
    telemetry::SampleRing<Totals> totals{rate_window + 1};
    std::uint64_t seen = 0;  // tick of the last sample that found the server
  };
  struct UpstreamSeries {
    telemetry::SampleRing<UpstreamSecond> seconds{chart_seconds};
    std::optional<Totals> unserved;  // at the previous sample
    std::uint64_t seen = 0;
  };

  Totals sample_server(const Endpoint& endpoint, unsigned workers);
  void forget_unseen();

  std::uint64_t tick_ = 0;
  std::unordered_map<std::uint32_t, ServerSeries> servers_;  // by Endpoint::id()
  std::unordered_map<std::string, UpstreamSeries> upstreams_;
  std::vector<std::vector<std::uint32_t>> pooled_;  // [worker][endpoint id]
};

}  // namespace sluice
