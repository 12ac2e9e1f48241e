#include "sluice/runtime/history.hpp"

#include <algorithm>
#include <iterator>

namespace sluice {

Totals& Totals::operator+=(const Totals& other) {
  requests += other.requests;
  errors += other.errors;
  retries += other.retries;
  for (std::size_t b = 0; b < durations.size(); ++b) durations[b] += other.durations[b];
  return *this;
}

Totals& Totals::operator-=(const Totals& other) {
  requests -= other.requests;
  errors -= other.errors;
  retries -= other.retries;
  for (std::size_t b = 0; b < durations.size(); ++b) durations[b] -= other.durations[b];
  return *this;
}

void add_slot(Totals& into, const EndpointCounters& slot) {
  const auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  for (const auto& r : slot.responses) into.requests += get(r);
  // The origin's 5xx, and sluice's own 4xx and 5xx (`return` answers are not errors).
  using K = EndpointCounters;
  into.errors += get(slot.responses[K::origin_answer_slot(500)]) + get(slot.responses[K::own_answer_slot(400)]) +
                 get(slot.responses[K::own_answer_slot(500)]);
  for (const auto& r : slot.retries) into.retries += get(r);
  for (std::size_t b = 0; b < into.durations.size(); ++b) into.durations[b] += get(slot.duration_counts[b]);
}

Totals totals_of(const Endpoint& endpoint, unsigned workers) {
  Totals t;
  for (unsigned w = 0; w < std::min(workers, Endpoint::max_worker_slots); ++w) add_slot(t, endpoint.counters(w));
  return t;
}

std::optional<double> quantile_ms(const std::array<std::uint64_t, EndpointCounters::buckets + 1>& counts,
                                  double q) {
  std::uint64_t total = 0;
  for (const auto c : counts) total += c;
  if (total == 0) return std::nullopt;
  const double rank = q * static_cast<double>(total);
  double below = 0;
  for (std::size_t b = 0; b < counts.size(); ++b) {
    const auto in_bucket = static_cast<double>(counts[b]);
    if (b + 1 == counts.size()) return duration_bounds[b - 1] * 1000.0;  // beyond the last bound
    if (below + in_bucket >= rank && in_bucket > 0) {
      const double lower = b == 0 ? 0.0 : duration_bounds[b - 1];
      const double upper = duration_bounds[b];
      return (lower + (upper - lower) * (rank - below) / in_bucket) * 1000.0;
    }
    below += in_bucket;
  }
  return duration_bounds[EndpointCounters::buckets - 1] * 1000.0;
}

Totals History::sample_server(const Endpoint& endpoint, unsigned workers) {
  auto& series = servers_[endpoint.id()];
  const Totals now = totals_of(endpoint, workers);
  // A server new to this sample has no previous total: its first second counts nothing rather
  // than everything it served before (e.g. under a previous upstream name).
  const Totals delta = series.totals.empty() ? Totals{} : now - series.totals.newest();
  series.totals.push(now);
  series.seen = tick_;
  return delta;
}

void History::sample(const Snapshot& snapshot, unsigned workers) {
  ++tick_;
  for (const auto& u : snapshot.upstreams) {
    Totals second;
    for (const Endpoint* ep : u->endpoints()) second += sample_server(*ep, workers);
    auto& series = upstreams_[u->name()];
    Totals unserved;
    for (unsigned w = 0; w < std::min(workers, Endpoint::max_worker_slots); ++w) add_slot(unserved, u->unserved(w));
    if (series.unserved) second += unserved - *series.unserved;
    series.unserved = unserved;
    series.seen = tick_;
    series.seconds.push({tick_, second.requests, second.errors, quantile_ms(second.durations, 0.99)});
  }
  forget_unseen();
}

void History::forget_unseen() {
  std::erase_if(servers_, [&](const auto& entry) { return entry.second.seen != tick_; });
  std::erase_if(upstreams_, [&](const auto& entry) { return entry.second.seen != tick_; });
}

ServerRates History::rates(const Endpoint& endpoint) const {
  ServerRates r;
  const auto it = servers_.find(endpoint.id());
  if (it == servers_.end() || it->second.totals.empty()) return r;
  const auto& ring = it->second.totals;
  r.retries = ring.newest().retries;
  for (const auto& counts : pooled_)
    if (endpoint.id() < counts.size()) r.pooled += counts[endpoint.id()];
  if (ring.size() < 2) return r;
  const Totals window = ring.newest() - ring[0];
  const auto seconds = static_cast<double>(ring.size() - 1);
  r.rps = static_cast<double>(window.requests) / seconds;
  if (window.requests != 0)
    r.error_rate = static_cast<double>(window.errors) / static_cast<double>(window.requests);
  r.p50_ms = quantile_ms(window.durations, 0.5);
  r.p99_ms = quantile_ms(window.durations, 0.99);
  return r;
}

void History::set_pooled(std::size_t worker, std::vector<std::uint32_t> by_endpoint) {
  if (pooled_.size() <= worker) pooled_.resize(worker + 1);
  pooled_[worker] = std::move(by_endpoint);
}

const telemetry::SampleRing<UpstreamSecond>* History::seconds(const std::string& upstream) const {
  const auto it = upstreams_.find(upstream);
  return it == upstreams_.end() ? nullptr : &it->second.seconds;
}

}  // namespace sluice
