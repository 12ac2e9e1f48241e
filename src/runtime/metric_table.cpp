// GET /metrics: the table of metric families and the exposition rendered from it.
#include "sluice/runtime/metric_table.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <sstream>
#include <vector>

#include "sluice/core/file.hpp"
#include "sluice/discovery/discovery.hpp"
#include "sluice/health/server_health.hpp"
#include "sluice/idempotency/guard.hpp"
#include "sluice/core/grpc_codes.hpp"
#include "sluice/proxy/h2_session.hpp"
#include "sluice/proxy/proxy_protocol.hpp"
#include "sluice/proxy/retry.hpp"
#include "sluice/proxy/unrouted.hpp"
#include "sluice/runtime/control.hpp"
#include "sluice/runtime/fleet.hpp"
#include "sluice/tls/acme_slot.hpp"

namespace sluice {

namespace {

using telemetry::Label;
using telemetry::MetricsText;
using telemetry::MetricType;

// Prometheus label values are snake_case words: "connect refused" -> "connect_refused".
std::string snake_case(std::string_view text) {
  std::string out(text);
  std::ranges::replace(out, ' ', '_');
  return out;
}

// One EndpointCounters slot summed over the workers: by response slot, and the histogram.
struct CounterTotals {
  std::uint64_t responses[EndpointCounters::response_slots] = {};
  std::uint64_t durations[EndpointCounters::buckets + 1] = {};
  double sum_s = 0;
  std::uint64_t grpc[2][EndpointCounters::grpc_code_slots] = {};
  void add(const EndpointCounters& k) {
    for (std::size_t source = 0; source < 2; ++source)
      for (std::size_t c = 0; c < EndpointCounters::grpc_code_slots; ++c)
        grpc[source][c] += k.grpc_codes[source][c].load(std::memory_order_relaxed);
    for (std::size_t r = 0; r < EndpointCounters::response_slots; ++r)
      responses[r] += k.responses[r].load(std::memory_order_relaxed);
    for (std::size_t b = 0; b <= EndpointCounters::buckets; ++b)
      durations[b] += k.duration_counts[b].load(std::memory_order_relaxed);
    sum_s += static_cast<double>(k.duration_sum_us.load(std::memory_order_relaxed)) / 1e6;
  }
};

// The series of sluice_requests_total and sluice_request_duration_seconds, in order: each
// server, then its upstream's answers without a server (server=""), and last the answers before
// routing and `return` answers (upstream="", server=""). `always`: a server's series, shown even
// before its first answer. Calls f(upstream, server, totals, always).
template <class F>
void for_each_request_series(const Scrape& s, F f) {
  for (const auto& u : s.snapshot.upstreams) {
    for (Endpoint* ep : u->endpoints()) {
      CounterTotals t;
      for (unsigned w = 0; w < s.slots; ++w) t.add(ep->counters(w));
      f(u->name(), ep->identity(), t, true);
    }
    CounterTotals unserved;
    for (unsigned w = 0; w < s.slots; ++w) unserved.add(u->unserved(w));
    f(u->name(), "", unserved, false);
  }
  CounterTotals unrouted;
  proxy::for_each_unrouted(s.slots, [&](const EndpointCounters& k) { unrouted.add(k); });
  f("", "", unrouted, false);
}

// By status class and source; a server's 2xx always, any other class once it happened.
void request_samples(const Scrape& s, MetricsText& m) {
  using K = EndpointCounters;
  static constexpr std::string_view classes[K::status_classes] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
  for_each_request_series(s, [&](std::string_view upstream, std::string_view server, const CounterTotals& t,
                                 bool always) {
    const auto sample = [&](std::string_view code, std::string_view source, std::uint64_t n) {
      m.sample({{"upstream", upstream}, {"server", server}, {"code", code}, {"source", source}},
               static_cast<double>(n));
    };
    for (unsigned c = 1; c <= K::status_classes; ++c) {
      const auto from_origin = t.responses[K::origin_answer_slot(100 * c)];
      if (from_origin != 0 || (always && c == 2)) sample(classes[c - 1], "upstream", from_origin);
      if (const auto own = t.responses[K::own_answer_slot(100 * c)]; own != 0) sample(classes[c - 1], "sluice", own);
    }
    if (const auto cut = t.responses[K::cut_slot]; cut != 0) sample("cut", "upstream", cut);
    if (const auto cut = t.responses[K::client_cut_slot]; cut != 0) sample("cut", "client", cut);
  });
}

// gRPC calls by grpc-status and who gave it, once it happened.
void grpc_samples(const Scrape& s, MetricsText& m) {
  for_each_request_series(s, [&](std::string_view upstream, std::string_view server, const CounterTotals& t, bool) {
    for (std::size_t source = 0; source < 2; ++source)
      for (std::size_t c = 0; c < EndpointCounters::grpc_code_slots; ++c)
        if (const auto n = t.grpc[source][c]; n != 0)
          m.sample({{"upstream", upstream}, {"server", server}, {"grpc_code", grpc_code_names[c]},
                    {"source", source == 0 ? "upstream" : "sluice"}},
                   static_cast<double>(n));
  });
}

// A per-server figure of the servers of upstreams that speak HTTP/2 to them (protocol h2, h2c).
template <auto Figure>
void h2_server_samples(const Scrape& s, MetricsText& m) {
  for (const auto& u : s.snapshot.upstreams)
    if (u->config().protocol != config::UpstreamProtocol::http1)
      for (const Endpoint* ep : u->endpoints())
        m.sample({{"upstream", u->name()}, {"server", ep->identity()}}, static_cast<double>((ep->*Figure)()));
}

// A server's histogram always; the others once they observed an answer.
void duration_samples(const Scrape& s, MetricsText& m) {
  for_each_request_series(s, [&](std::string_view upstream, std::string_view server, const CounterTotals& t,
                                 bool always) {
    std::uint64_t observed = 0;
    for (const auto d : t.durations) observed += d;
    if (observed == 0 && !always) return;
    m.sample({{"upstream", upstream}, {"server", server}},
             telemetry::HistogramSample{duration_bounds, t.durations, t.sum_s});
  });
}

// RST_STREAM frames by direction and error code, once one happened.
void http2_reset_samples(const Scrape&, MetricsText& m) {
  for (const bool sent : {false, true})
    for (std::size_t r = 0; r < proxy::http2_reset_reasons; ++r)
      if (const auto n = proxy::http2_reset_total(sent, r); n != 0)
        m.sample({{"direction", sent ? "sent" : "received"}, {"reason", proxy::http2_reset_names[r]}},
                 static_cast<double>(n));
}

// HTTP/2 frames that brought no request, by kind.
void http2_glitch_samples(const Scrape&, MetricsText& m) {
  for (std::size_t k = 0; k < std::size(proxy::http2_glitch_names); ++k)
    m.sample({{"kind", proxy::http2_glitch_names[k]}},
             static_cast<double>(proxy::http2_glitch_total(static_cast<proxy::Http2Glitch>(k))));
}

// Tunnels ended, by upstream and TunnelVerdict.
void tunnels_closed_samples(const Scrape& s, MetricsText& m) {
  static constexpr std::string_view reasons[tunnel_verdict_count] = {"closed", "idle", "drain"};
  for (const auto& u : s.snapshot.upstreams)
    for (std::size_t r = 0; r < tunnel_verdict_count; ++r) {
      std::uint64_t v = 0;
      for (Endpoint* ep : u->endpoints())
        v += ep->sum_counters(s.slots, [r](const EndpointCounters& k) -> const auto& { return k.tunnels_closed[r]; });
      m.sample({{"upstream", u->name()}, {"reason", reasons[r]}}, static_cast<double>(v));
    }
}

// 1 for the state each server is in, draining over the health state.
void server_state_samples(const Scrape& s, MetricsText& m) {
  static constexpr ServerState states[] = {ServerState::up, ServerState::down, ServerState::ejected,
                                           ServerState::slow_start};
  for (const auto& u : s.snapshot.upstreams)
    for (Endpoint* ep : u->endpoints()) {
      for (const auto st : states)
        m.sample({{"upstream", u->name()}, {"server", ep->identity()}, {"state", to_string(st)}},
                 !ep->draining() && ep->state() == st ? 1 : 0);
      m.sample({{"upstream", u->name()}, {"server", ep->identity()}, {"state", "draining"}},
               ep->draining() ? 1 : 0);
    }
}

// Retries made, by upstream and the failure retried ([0]: a status in `on`).
void retry_samples(const Scrape& s, MetricsText& m) {
  for (const auto& u : s.snapshot.upstreams)
    for (std::size_t f = 0; f < proxy::failure_kind_count; ++f) {
      if (f == static_cast<std::size_t>(proxy::FailureKind::client_failed)) continue;  // never retried
      std::uint64_t v = 0;
      for (Endpoint* ep : u->endpoints())
        v += ep->sum_counters(s.slots, [f](const EndpointCounters& k) -> const auto& { return k.retries[f]; });
      const auto reason = f == 0 ? std::string_view("status") : health::describe(static_cast<proxy::FailureKind>(f));
      m.sample({{"upstream", u->name()}, {"reason", snake_case(reason)}}, static_cast<double>(v));
    }
}

// Retries not made, by upstream and RetrySkip.
void retry_skip_samples(const Scrape& s, MetricsText& m) {
  for (const auto& u : s.snapshot.upstreams)
    for (std::size_t r = 1; r < retry_skip_count; ++r) {
      std::uint64_t v = 0;
      for (Endpoint* ep : u->endpoints())
        v += ep->sum_counters(s.slots, [r](const EndpointCounters& k) -> const auto& { return k.retry_skips[r]; });
      m.sample({{"upstream", u->name()}, {"reason", snake_case(proxy::describe(static_cast<RetrySkip>(r)))}},
               static_cast<double>(v));
    }
}

// Requests with an Idempotency-Key, by upstream (those with [idempotency] on) and outcome.
void idempotency_samples(const Scrape& s, MetricsText& m) {
  for (const auto& u : s.snapshot.upstreams)
    if (const auto* g = u->idempotency())
      for (std::size_t o = 1; o < idempotency::outcome_count; ++o) {
        const auto outcome = static_cast<idempotency::Outcome>(o);
        m.sample({{"upstream", u->name()}, {"outcome", idempotency::to_string(outcome)}},
                 static_cast<double>(g->backing().total(outcome)));
      }
}

// A figure of each upstream's idempotency store that keeps figures (memory; Redis keeps its own).
template <std::uint64_t idempotency::StoreStats::*figure>
void idempotency_store_samples(const Scrape& s, MetricsText& m) {
  for (const auto& u : s.snapshot.upstreams)
    if (const auto* g = u->idempotency())
      if (const auto stats = g->backing().store->stats(); stats.known)
        m.sample({{"upstream", u->name()}}, static_cast<double>(stats.*figure));
}

// Active probes of each server, by result.
void health_check_samples(const Scrape& s, MetricsText& m) {
  for (const auto& u : s.snapshot.upstreams)
    for (Endpoint* ep : u->endpoints()) {
      m.sample({{"upstream", u->name()}, {"server", ep->identity()}, {"result", "pass"}},
               static_cast<double>(ep->probes_passed.load()));
      m.sample({{"upstream", u->name()}, {"server", ep->identity()}, {"result", "fail"}},
               static_cast<double>(ep->probes_failed.load()));
    }
}

// An upstream's passive ejections, made or refused, summed over its servers.
template <std::uint64_t health::HealthStatus::*count>
double ejections(const Scrape&, const Upstream& u) {
  std::uint64_t v = 0;
  for (Endpoint* ep : u.endpoints())
    if (ep->has_health()) v += ep->health().status().*count;
  return static_cast<double>(v);
}

bool discovers(const Scrape& s) {
  const auto* d = s.process.discovery();
  return d != nullptr && !d->sources().empty();
}

// One sample per DNS name followed, labelled {upstream, name}.
template <class Value>
void per_name(const Scrape& s, MetricsText& m, Value value) {
  for (const auto* source : s.process.discovery()->sources())
    m.sample({{"upstream", source->upstream()}, {"name", source->name()}}, value(*source));
}

void dns_resolution_samples(const Scrape& s, MetricsText& m) {
  static constexpr std::string_view results[discovery::outcome_count] = {"ok", "empty", "failed"};
  for (const auto* source : s.process.discovery()->sources())
    for (std::size_t r = 0; r < discovery::outcome_count; ++r)
      m.sample({{"upstream", source->upstream()}, {"name", source->name()}, {"result", results[r]}},
               static_cast<double>(source->resolutions(static_cast<discovery::Outcome>(r))));
}

void reload_samples(const Scrape& s, MetricsText& m) {
  m.sample({{"result", "success"}}, static_cast<double>(s.process.reloads_ok()));
  m.sample({{"result", "failure"}}, static_cast<double>(s.process.reloads_failed()));
}

bool in_fleet(const Scrape& s) { return s.process.fleet() != nullptr; }
bool shares_ejections(const Scrape& s) { return in_fleet(s) && s.process.fleet()->shares_ejections(); }

bool has_tls_listeners(const Scrape& s) { return !s.snapshot.config->server.tls.empty(); }

bool staples_ocsp(const Scrape& s) {
  return std::ranges::any_of(s.snapshot.tls, [](const auto& listener) { return !listener->staples().empty(); });
}

// Each OCSP-stapled certificate once (listeners may share a file), by its cert file: f(staple,
// the response stapled now or null, now in seconds since the epoch).
template <class F>
void ocsp_samples(const Scrape& s, F f) {
  std::vector<const tls::OcspStaple*> seen;
  const auto now = static_cast<tls::ocsp::UnixTime>(std::time(nullptr));
  for (const auto& listener : s.snapshot.tls)
    for (const auto& staple : listener->staples()) {
      if (std::ranges::find(seen, staple.get()) != seen.end()) continue;
      seen.push_back(staple.get());
      const auto current = staple->current();
      f(*staple, current && tls::ocsp::stapleable(*current, now) ? current.get() : nullptr, now);
    }
}

// Seconds the stapled response has left, and its status (only while one is stapled).
void ocsp_expiry_samples(const Scrape& s, MetricsText& m) {
  ocsp_samples(s, [&m](const tls::OcspStaple& staple, const tls::ocsp::Response* r, tls::ocsp::UnixTime now) {
    if (r != nullptr)
      m.sample({{"cert", staple.cert_file()}, {"status", tls::ocsp::status_name(r->status)}},
               static_cast<double>(r->expires() - now));
  });
}

bool has_acme(const Scrape& s) {
  const auto& listeners = s.snapshot.config->server.tls;
  return std::any_of(listeners.begin(), listeners.end(), [](const auto& t) { return t.acme.has_value(); });
}

void acme_expiry_samples(const Scrape&, MetricsText& m) {
  const auto now = std::chrono::system_clock::now();
  for (const auto& slot : tls::acme::all_slots()) {
    const auto status = slot->status();
    if (!status.not_after) continue;
    m.sample({{"domain", slot->domains().front()}}, std::chrono::duration<double>(*status.not_after - now).count() / 86400);
  }
}

void acme_failure_samples(const Scrape&, MetricsText& m) {
  for (const auto& slot : tls::acme::all_slots())
    m.sample({{"domain", slot->domains().front()}}, static_cast<double>(slot->status().failures));
}

bool proxy_protocol_on(const Scrape& s) {
  const auto& server = s.snapshot.config->server;
  return server.proxy_protocol ||
         std::any_of(server.tls.begin(), server.tls.end(), [](const auto& t) { return t.proxy_protocol; });
}

void proxy_protocol_samples(const Scrape&, MetricsText& m) {
  using R = proxy::ProxyProtocolRejections;
  const auto total = [](auto field) { return static_cast<double>(proxy::proxy_protocol_rejected(field)); };
  m.sample({{"reason", "untrusted"}}, total(&R::untrusted));
  m.sample({{"reason", "malformed"}}, total(&R::malformed));
  m.sample({{"reason", "timeout"}}, total(&R::timeout));
}

bool has_admission(const Scrape& s) { return !s.snapshot.admissions.empty(); }

void connection_samples(const Scrape& s, MetricsText& m) {
  m.sample({{"side", "client"}}, static_cast<double>(s.process.client_connections()));
  if (const auto n = s.process.upstream_connections()) m.sample({{"side", "upstream"}}, static_cast<double>(*n));
}

constexpr auto counter = MetricType::counter;
constexpr auto gauge = MetricType::gauge;
constexpr auto histogram = MetricType::histogram;

// clang-format off
constexpr MetricFamily families[] = {
  {.name = "sluice_build_info", .type = gauge, .help = "Build information.",
   .samples = [](const Scrape&, MetricsText& m) { m.sample({{"version", SLUICE_VERSION}}, 1); }},
  {.name = "sluice_requests_total", .type = counter,
   .help = "Requests answered, by upstream, last server tried, status class (code) and who answered (source: "
           "upstream = the origin, sluice = sluice's own answer; code=\"cut\": an answer broken off after its "
           "head was sent, by the origin (source=upstream) or by the client leaving or not reading "
           "(source=client)).",
   .samples = request_samples},
  {.name = "sluice_grpc_responses_total", .type = counter,
   .help = "gRPC calls answered, by upstream, last server tried, grpc-status (grpc_code: OK, UNAVAILABLE, ...; "
           "OTHER for a value outside 0-16) and who gave it (source: upstream = the server, sluice = "
           "sluice's own gRPC-shaped answer).",
   .samples = grpc_samples},
  {.name = "sluice_upstream_http2_connections", .type = gauge,
   .help = "HTTP/2 connections open to a server of an upstream with protocol h2 or h2c, across workers.",
   .samples = h2_server_samples<&Endpoint::h2_connections>},
  {.name = "sluice_upstream_http2_goaways_total", .type = counter,
   .help = "GOAWAY frames received from a server of an upstream with protocol h2 or h2c.",
   .samples = h2_server_samples<&Endpoint::h2_goaways>},
  {.name = "sluice_request_duration_seconds", .type = histogram,
   .help = "Time from a request's head to the end of its answer, by upstream and server.",
   .samples = duration_samples},
  {.name = "sluice_upstream_in_flight", .type = gauge, .help = "Requests in flight to a server, across workers.",
   .per_server = [](const Scrape&, const Endpoint& ep) { return static_cast<double>(ep.in_flight()); }},
  {.name = "sluice_upstream_first_byte_ewma_seconds", .type = gauge,
   .help = "A least_time server's time to first response byte, peak EWMA (its estimate); 0 = none yet, or "
           "another policy.",
   .per_server = [](const Scrape&, const Endpoint& ep) { return ep.first_byte_time().last() / 1e9; }},
  {.name = "sluice_tunnels", .type = gauge,
   .help = "Upgrade tunnels (WebSocket) open to a server, across workers; also counted in "
           "sluice_upstream_in_flight.",
   .per_server = [](const Scrape&, const Endpoint& ep) { return static_cast<double>(ep.tunnels()); }},
  {.name = "sluice_tunnels_closed_total", .type = counter,
   .help = "Upgrade tunnels ended, by upstream and reason (closed: by a peer; idle: tunnel_idle_timeout; drain: "
           "tunnel_drain_timeout).",
   .samples = tunnels_closed_samples},
  {.name = "sluice_server_state", .type = gauge, .help = "1 for the server's current state.",
   .samples = server_state_samples},
  {.name = "sluice_retries_total", .type = counter, .help = "Retries made, by upstream and the failure retried.",
   .samples = retry_samples},
  {.name = "sluice_retries_skipped_total", .type = counter, .help = "Retries not made, by upstream and reason.",
   .samples = retry_skip_samples},
  {.name = "sluice_idempotency_total", .type = counter,
   .help = "Requests with an Idempotency-Key, by upstream and outcome (docs/idempotency.md).",
   .samples = idempotency_samples},
  {.name = "sluice_idempotency_store_bytes", .type = gauge,
   .help = "Bytes held by an upstream's memory idempotency store.",
   .samples = idempotency_store_samples<&idempotency::StoreStats::bytes>},
  {.name = "sluice_idempotency_evictions_total", .type = counter,
   .help = "Entries evicted from an upstream's memory idempotency store to stay within memory_limit.",
   .samples = idempotency_store_samples<&idempotency::StoreStats::evictions>},
  {.name = "sluice_health_checks_total", .type = counter, .help = "Active probes, by result.",
   .samples = health_check_samples},
  {.name = "sluice_ejections_total", .type = counter, .help = "Passive ejections, by upstream.",
   .per_upstream = ejections<&health::HealthStatus::ejections>},
  {.name = "sluice_ejections_refused_total", .type = counter,
   .help = "Passive ejections refused by max_ejected_percent (the server stayed in), by upstream.",
   .per_upstream = ejections<&health::HealthStatus::ejections_refused>},
  {.name = "sluice_dns_resolutions_total", .type = counter,
   .help = "DNS resolutions of discovered servers, by upstream, name and result.",
   .shown = discovers, .samples = dns_resolution_samples},
  {.name = "sluice_discovery_changes_total", .type = counter,
   .help = "Membership changes applied from DNS, by upstream and name.", .shown = discovers,
   .samples = [](const Scrape& s, MetricsText& m) {
     per_name(s, m, [](const discovery::Source& n) { return static_cast<double>(n.changes()); });
   }},
  {.name = "sluice_discovered_servers", .type = gauge, .help = "Servers a DNS name gives now, by upstream and name.",
   .shown = discovers,
   .samples = [](const Scrape& s, MetricsText& m) {
     per_name(s, m, [](const discovery::Source& n) { return static_cast<double>(n.servers().size()); });
   }},
  {.name = "sluice_dns_stale_seconds", .type = gauge,
   .help = "How long a name's servers have been kept after failed resolutions (0 = fresh).", .shown = discovers,
   .samples = [](const Scrape& s, MetricsText& m) {
     per_name(s, m, [&s](const discovery::Source& n) {
       return n.stale_since() ? std::chrono::duration<double>(s.now - *n.stale_since()).count() : 0.0;
     });
   }},
  {.name = "sluice_config_reloads_total", .type = counter, .help = "Configuration reloads, by result.",
   .samples = reload_samples},
  {.name = "sluice_config_rollbacks_total", .type = counter,
   .help = "Reloads rolled back by their watch ([reload] watch): a clear breach of the failed share or of the "
           "servers up after the reload.",
   .value = [](const Scrape& s) { return static_cast<double>(s.process.rollbacks()); }},
  {.name = "sluice_fleet_redis_up", .type = gauge,
   .help = "Fleet mode: 1 while the fleet's Redis answers, 0 while this instance's drains are its own.",
   .shown = in_fleet, .value = [](const Scrape& s) { return s.process.fleet()->redis_up() ? 1.0 : 0.0; }},
  {.name = "sluice_fleet_redis_lost_total", .type = counter,
   .help = "Fleet mode: times the fleet's Redis stopped answering (each outage once).",
   .shown = in_fleet, .value = [](const Scrape& s) { return static_cast<double>(s.process.fleet()->redis_lost()); }},
  {.name = "sluice_fleet_ejections_published_total", .type = counter,
   .help = "Fleet mode with share_ejections: this instance's passive ejections written to the fleet.",
   .shown = shares_ejections,
   .value = [](const Scrape& s) { return static_cast<double>(s.process.fleet()->ejections_published()); }},
  {.name = "sluice_fleet_ejections_applied_total", .type = counter,
   .help = "Fleet mode with share_ejections: other instances' passive ejections applied here.",
   .shown = shares_ejections,
   .value = [](const Scrape& s) { return static_cast<double>(s.process.fleet()->ejections_applied()); }},
  {.name = "sluice_access_log_dropped_total", .type = counter,
   .help = "Access log lines dropped because the worker's buffer was full (output too slow or blocked).",
   .value = [](const Scrape& s) { return static_cast<double>(s.process.access_log_dropped()); }},
  {.name = "sluice_acme_certificate_expiry_days", .type = gauge,
   .help = "Days until an ACME certificate expires, by its first domain (absent until one is issued).",
   .shown = has_acme, .samples = acme_expiry_samples},
  {.name = "sluice_acme_failures", .type = gauge,
   .help = "Consecutive failed attempts to obtain an ACME certificate, by its first domain (0 after a success).",
   .shown = has_acme, .samples = acme_failure_samples},
  {.name = "sluice_tls_handshakes_total", .type = counter, .help = "TLS handshakes on TLS listeners, completed.",
   .shown = has_tls_listeners,
   .value = [](const Scrape& s) { return static_cast<double>(s.process.tls_handshakes().first); }},
  {.name = "sluice_tls_handshake_failures_total", .type = counter,
   .help = "TLS handshakes on TLS listeners that failed or timed out (logged at debug).",
   .shown = has_tls_listeners,
   .value = [](const Scrape& s) { return static_cast<double>(s.process.tls_handshakes().second); }},
  {.name = "sluice_tls_ocsp_staple_expiry_seconds", .type = gauge,
   .help = "Seconds until the stapled OCSP response's nextUpdate, by certificate file and status.",
   .shown = staples_ocsp, .samples = ocsp_expiry_samples},
  {.name = "sluice_tls_ocsp_staple_age_seconds", .type = gauge,
   .help = "Age of the stapled OCSP response (since its thisUpdate), by certificate file.",
   .shown = staples_ocsp,
   .samples = [](const Scrape& s, MetricsText& m) {
     ocsp_samples(s, [&m](const tls::OcspStaple& staple, const tls::ocsp::Response* r, tls::ocsp::UnixTime now) {
       if (r != nullptr)
         m.sample({{"cert", staple.cert_file()}}, static_cast<double>(now - r->this_update));
     });
   }},
  {.name = "sluice_tls_ocsp_fetch_failures_total", .type = counter,
   .help = "OCSP fetches that failed (no answer, an answer that does not verify, status unknown), by certificate "
           "file.",
   .shown = staples_ocsp,
   .samples = [](const Scrape& s, MetricsText& m) {
     ocsp_samples(s, [&m](const tls::OcspStaple& staple, const tls::ocsp::Response*, tls::ocsp::UnixTime) {
       m.sample({{"cert", staple.cert_file()}}, static_cast<double>(staple.failures()));
     });
   }},
  {.name = "sluice_http2_connections_total", .type = counter,
   .help = "Client connections served as HTTP/2 (ALPN h2, or h2c with prior knowledge).",
   .value = [](const Scrape&) { return static_cast<double>(proxy::http2_total(&proxy::Http2Counters::connections)); }},
  {.name = "sluice_http2_streams_total", .type = counter, .help = "HTTP/2 request streams the clients opened.",
   .value = [](const Scrape&) { return static_cast<double>(proxy::http2_total(&proxy::Http2Counters::streams)); }},
  {.name = "sluice_http2_open_connections", .type = gauge, .help = "Client connections open as HTTP/2.",
   .value = [](const Scrape&) { return static_cast<double>(proxy::http2_open_connections()); }},
  {.name = "sluice_http2_open_streams", .type = gauge,
   .help = "HTTP/2 request streams open (the client's request or sluice's answer not done).",
   .value = [](const Scrape&) { return static_cast<double>(proxy::http2_open_streams()); }},
  {.name = "sluice_http2_resets_total", .type = counter,
   .help = "RST_STREAM frames on client connections, by direction (received from the client, sent by sluice) "
           "and error code (reason: cancel, refused_stream, protocol_error, ...).",
   .samples = http2_reset_samples},
  {.name = "sluice_http2_goaways_sent_total", .type = counter,
   .help = "GOAWAY frames sluice sent to HTTP/2 clients (shutdown and reload drains, protocol errors, "
           "ENHANCE_YOUR_CALM).",
   .value = [](const Scrape&) { return static_cast<double>(proxy::http2_total(&proxy::Http2Counters::goaways_sent)); }},
  {.name = "sluice_http2_early_resets_total", .type = counter,
   .help = "HTTP/2 streams the client reset before their answer was sent.",
   .value = [](const Scrape&) { return static_cast<double>(proxy::http2_total(&proxy::Http2Counters::early_resets)); }},
  {.name = "sluice_http2_calm_closes_total", .type = counter,
   .help = "HTTP/2 connections closed with GOAWAY(ENHANCE_YOUR_CALM): http2_max_early_resets or "
           "http2_max_glitches reached.",
   .value = [](const Scrape&) { return static_cast<double>(proxy::http2_total(&proxy::Http2Counters::calm_closes)); }},
  {.name = "sluice_http2_glitches_total", .type = counter,
   .help = "HTTP/2 frames that brought no request (PING, SETTINGS after the first, PRIORITY, empty DATA, a frame "
           "nghttp2 refused), by kind.",
   .samples = http2_glitch_samples},
  {.name = "sluice_http2_glitch_closes_total", .type = counter,
   .help = "HTTP/2 connections closed with GOAWAY(ENHANCE_YOUR_CALM) because they reached http2_max_glitches.",
   .value = [](const Scrape&) { return static_cast<double>(proxy::http2_total(&proxy::Http2Counters::glitch_closes)); }},
  {.name = "sluice_proxy_protocol_rejected_total", .type = counter,
   .help = "Connections closed on a proxy_protocol listener, by reason (untrusted peer, malformed header, header "
           "timeout).",
   .shown = proxy_protocol_on, .samples = proxy_protocol_samples},
  {.name = "sluice_admission_denied_total", .type = counter,
   .help = "Requests answered 403 by a route's allow/deny, by route.", .shown = has_admission,
   .samples = [](const Scrape& s, MetricsText& m) {
     for (const auto& a : s.snapshot.admissions) m.sample({{"route", a->label()}}, static_cast<double>(a->denied()));
   }},
  {.name = "sluice_rate_limited_total", .type = counter,
   .help = "Requests answered 429 by a route's rate_limit, by route.", .shown = has_admission,
   .samples = [](const Scrape& s, MetricsText& m) {
     for (const auto& a : s.snapshot.admissions)
       if (a->limiter() != nullptr) m.sample({{"route", a->label()}}, static_cast<double>(a->limited()));
   }},
  {.name = "sluice_connections", .type = gauge, .help = "Open connections, by side.", .samples = connection_samples},
  {.name = "sluice_parked_connections", .type = gauge,
   .help = "Idle keep-alive client connections parked without a session, across workers; also in "
           "sluice_connections{side=\"client\"}.",
   .value = [](const Scrape& s) { return static_cast<double>(s.process.parked_connections()); }},
  // The standard process_* metrics, as client libraries export them.
  {.name = "process_cpu_seconds_total", .type = counter, .help = "Total user and system CPU time spent in seconds.",
   .shown = [](const Scrape& s) { return s.figures.cpu_seconds.has_value(); },
   .value = [](const Scrape& s) { return *s.figures.cpu_seconds; }},
  {.name = "process_resident_memory_bytes", .type = gauge, .help = "Resident memory size in bytes.",
   .shown = [](const Scrape& s) { return s.figures.resident_bytes.has_value(); },
   .value = [](const Scrape& s) { return *s.figures.resident_bytes; }},
  {.name = "process_start_time_seconds", .type = gauge,
   .help = "Start time of the process since unix epoch in seconds.",
   .shown = [](const Scrape& s) { return s.figures.start_time.has_value(); },
   .value = [](const Scrape& s) { return *s.figures.start_time; }},
  {.name = "process_open_fds", .type = gauge, .help = "Number of open file descriptors.",
   .shown = [](const Scrape& s) { return s.figures.open_fds.has_value(); },
   .value = [](const Scrape& s) { return *s.figures.open_fds; }},
  {.name = "process_max_fds", .type = gauge, .help = "Maximum number of open file descriptors.",
   .shown = [](const Scrape& s) { return s.figures.max_fds.has_value(); },
   .value = [](const Scrape& s) { return *s.figures.max_fds; }},
};
// clang-format on

// /proc/self/stat's CPU time, resident memory and start time (proc(5)).
void read_stat(ProcessFigures& p) {
  const long ticks = sysconf(_SC_CLK_TCK);
  const long page = sysconf(_SC_PAGESIZE);
  std::string stat;
  if (ticks <= 0 || read_whole_file("/proc/self/stat", stat) != 0) return;
  // Fields after the command's closing parenthesis: state is field 3; utime 14, stime 15,
  // starttime 22, rss 24.
  std::istringstream in(stat.substr(stat.rfind(')') + 2));
  std::vector<std::string> f{std::istream_iterator<std::string>(in), {}};
  if (f.size() <= 21) return;
  const auto field = [&](std::size_t n) { return std::strtod(f[n - 3].c_str(), nullptr); };
  p.cpu_seconds = (field(14) + field(15)) / static_cast<double>(ticks);
  p.resident_bytes = field(24) * static_cast<double>(page);
  std::string uptime;
  if (read_whole_file("/proc/uptime", uptime) != 0) return;
  const double since_boot = std::strtod(uptime.c_str(), nullptr);
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  p.start_time = std::floor(static_cast<double>(now.tv_sec) - since_boot + field(22) / static_cast<double>(ticks));
}

}  // namespace

ProcessFigures ProcessFigures::read() {
  ProcessFigures p;
  read_stat(p);
  std::error_code ec;
  std::size_t fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++fds;
  if (!ec) p.open_fds = static_cast<double>(fds);
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) p.max_fds = static_cast<double>(limit.rlim_cur);
  return p;
}

std::span<const MetricFamily> metric_families() { return families; }

std::string render_metrics(const Scrape& s) {
  MetricsText m;
  for (const auto& f : families) {
    if (f.shown != nullptr && !f.shown(s)) continue;
    m.family(f.name, f.help, f.type);
    if (f.value != nullptr) {
      m.sample(f.value(s));
    } else if (f.per_upstream != nullptr) {
      for (const auto& u : s.snapshot.upstreams) m.sample({{"upstream", u->name()}}, f.per_upstream(s, *u));
    } else if (f.per_server != nullptr) {
      for (const auto& u : s.snapshot.upstreams)
        for (const Endpoint* ep : u->endpoints())
          m.sample({{"upstream", u->name()}, {"server", ep->identity()}}, f.per_server(s, *ep));
    } else {
      f.samples(s, m);
    }
  }
  return m.take();
}

std::string RuntimeControl::metrics_text() {
  const auto snapshot = process_.snapshot();
  const unsigned slots = std::min(process_.workers(), Endpoint::max_worker_slots);
  return render_metrics({*snapshot, process_, slots, steady_clock().now(), ProcessFigures::read()});
}

}  // namespace sluice
