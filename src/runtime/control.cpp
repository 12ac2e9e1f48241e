// The admin API's view of the running process (admin::Control): status JSON, Prometheus metrics,
// reload and drain. Runs on the control thread only.
#include "sluice/runtime/control.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <sstream>

#include <sys/resource.h>
#include <unistd.h>

#include <boost/json.hpp>

#include "sluice/core/file.hpp"

#include "sluice/health/server_health.hpp"
#include "sluice/idempotency/guard.hpp"
#include "sluice/proxy/error_response.hpp"
#include "sluice/proxy/proxy_protocol.hpp"
#include "sluice/proxy/retry.hpp"
#include "sluice/proxy/unrouted.hpp"
#include "sluice/telemetry/metrics.hpp"

namespace sluice {

namespace json = boost::json;

namespace {

double ms_since(Clock::time_point t, Clock::time_point now) {
  return std::chrono::duration<double, std::milli>(now - t).count();
}

// Where a server came from: the file, or a DNS name (with that name's staleness).
void add_origin(json::object& so, const config::ServerConfig& server, const json::array& discovered) {
  so["origin"] = server.origin.empty() ? "config" : server.origin;
  if (server.origin.empty()) return;
  so["source"] = server.source;
  for (const auto& d : discovered) {
    const auto& o = d.as_object();
    if (o.at("name").as_string() != server.source) continue;
    so["stale"] = o.at("stale");
    so["stale_for_ms"] = o.at("stale_for_ms");
  }
}

// Sum of one counter over every worker slot.
template <class Get>
std::uint64_t sum(const Endpoint& ep, unsigned workers, Get get) {
  std::uint64_t total = 0;
  for (unsigned w = 0; w < std::min(workers, Endpoint::max_worker_slots); ++w)
    total += get(ep.counters(w)).load(std::memory_order_relaxed);
  return total;
}

// PROXY protocol refusals (when a listener expects it) and each admission route's refusals.
void edge_metrics(telemetry::MetricsText& m, const Snapshot& snapshot) {
  const auto& server = snapshot.config->server;
  const bool proxied = server.proxy_protocol ||
                       std::any_of(server.tls.begin(), server.tls.end(),
                                   [](const auto& t) { return t.proxy_protocol; });
  if (proxied) {
    using R = proxy::ProxyProtocolRejections;
    const auto total = [](auto field) { return static_cast<double>(proxy::proxy_protocol_rejected(field)); };
    m.counter("sluice_proxy_protocol_rejected_total",
              "Connections closed on a proxy_protocol listener, by reason (untrusted peer, "
              "malformed header, header timeout).");
    m.sample({{"reason", "untrusted"}}, total(&R::untrusted));
    m.sample({{"reason", "malformed"}}, total(&R::malformed));
    m.sample({{"reason", "timeout"}}, total(&R::timeout));
  }
  if (snapshot.admissions.empty()) return;
  m.counter("sluice_admission_denied_total", "Requests answered 403 by a route's allow/deny, by route.");
  for (const auto& a : snapshot.admissions)
    m.sample({{"route", a->label()}}, static_cast<double>(a->denied()));
  m.counter("sluice_rate_limited_total", "Requests answered 429 by a route's rate_limit, by route.");
  for (const auto& a : snapshot.admissions)
    if (a->limiter() != nullptr)
      m.sample({{"route", a->label()}}, static_cast<double>(a->limited()));
}

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
  void add(const EndpointCounters& k) {
    for (std::size_t r = 0; r < EndpointCounters::response_slots; ++r)
      responses[r] += k.responses[r].load(std::memory_order_relaxed);
    for (std::size_t b = 0; b <= EndpointCounters::buckets; ++b)
      durations[b] += k.duration_counts[b].load(std::memory_order_relaxed);
    sum_s += static_cast<double>(k.duration_sum_us.load(std::memory_order_relaxed)) / 1e6;
  }
};

// sluice_requests_total and sluice_request_duration_seconds of one series: a server, an
// upstream's answers without a server (server=""), or the answers before routing and `return`
// answers (upstream="", server="").
void request_series(telemetry::MetricsText& m, std::string_view upstream, std::string_view server,
                    const CounterTotals& t, bool always) {
  static constexpr const char* classes[6] = {"", "1xx", "2xx", "3xx", "4xx", "5xx"};
  m.counter("sluice_requests_total", "");
  for (std::size_t c = 1; c <= 5; ++c) {
    const auto from_origin = t.responses[c];
    if (from_origin != 0 || (always && c == 2))
      m.sample({{"upstream", upstream}, {"server", server}, {"code", classes[c]}, {"source", "upstream"}},
               static_cast<double>(from_origin));
    if (const auto own = t.responses[EndpointCounters::cut_slot + c]; own != 0)
      m.sample({{"upstream", upstream}, {"server", server}, {"code", classes[c]}, {"source", "sluice"}},
               static_cast<double>(own));
  }
  if (const auto cut = t.responses[EndpointCounters::cut_slot]; cut != 0)
    m.sample({{"upstream", upstream}, {"server", server}, {"code", "cut"}, {"source", "upstream"}},
             static_cast<double>(cut));
  if (const auto cut = t.responses[EndpointCounters::client_cut_slot]; cut != 0)
    m.sample({{"upstream", upstream}, {"server", server}, {"code", "cut"}, {"source", "client"}},
             static_cast<double>(cut));
  std::uint64_t observed = 0;
  for (const auto d : t.durations) observed += d;
  if (observed == 0 && !always) return;
  m.histogram("sluice_request_duration_seconds", "");
  m.sample({{"upstream", upstream}, {"server", server}},
           telemetry::HistogramSample{duration_bounds, t.durations, t.sum_s});
}

void request_metrics(telemetry::MetricsText& m, const Snapshot& snapshot, unsigned workers) {
  // Declared first, so that their HELP comes with the families whatever series follow.
  m.counter("sluice_requests_total",
            "Requests answered, by upstream, last server tried, status class (code) and who "
            "answered (source: upstream = the origin, sluice = sluice's own answer; code=\"cut\": "
            "an answer broken off after its head was sent, by the origin (source=upstream) or by "
            "the client leaving or not reading (source=client)).");
  m.histogram("sluice_request_duration_seconds",
              "Time from a request's head to the end of its answer, by upstream and server.");
  const unsigned slots = std::min(workers, Endpoint::max_worker_slots);
  for (const auto& u : snapshot.upstreams) {
    for (Endpoint* ep : u->endpoints()) {
      CounterTotals t;
      for (unsigned w = 0; w < slots; ++w) t.add(ep->counters(w));
      request_series(m, u->name(), ep->identity(), t, true);
    }
    CounterTotals unserved;
    for (unsigned w = 0; w < slots; ++w) unserved.add(u->unserved(w));
    request_series(m, u->name(), "", unserved, false);
  }
  CounterTotals unrouted;
  proxy::for_each_unrouted(slots, [&](const EndpointCounters& k) { unrouted.add(k); });
  request_series(m, "", "", unrouted, false);
}

// The standard process_* metrics (as client libraries export them), from /proc/self.
void process_metrics(telemetry::MetricsText& m) {
  const long ticks = sysconf(_SC_CLK_TCK);
  const long page = sysconf(_SC_PAGESIZE);
  std::string stat;
  if (read_whole_file("/proc/self/stat", stat) == 0) {
    // Fields after the command's closing parenthesis: state is field 3; utime 14, stime 15,
    // starttime 22, rss 24 (proc(5)).
    std::istringstream in(stat.substr(stat.rfind(')') + 2));
    std::vector<std::string> f{std::istream_iterator<std::string>(in), {}};
    if (f.size() > 21 && ticks > 0) {
      const auto field = [&](std::size_t n) { return std::strtod(f[n - 3].c_str(), nullptr); };
      m.counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.");
      m.sample((field(14) + field(15)) / static_cast<double>(ticks));
      m.gauge("process_resident_memory_bytes", "Resident memory size in bytes.");
      m.sample(field(24) * static_cast<double>(page));
      std::string uptime;
      if (read_whole_file("/proc/uptime", uptime) == 0) {
        const double since_boot = std::strtod(uptime.c_str(), nullptr);
        timespec now{};
        clock_gettime(CLOCK_REALTIME, &now);
        const double started = static_cast<double>(now.tv_sec) - since_boot + field(22) / static_cast<double>(ticks);
        m.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.");
        m.sample(std::floor(started));
      }
    }
  }
  std::error_code ec;
  std::size_t fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++fds;
  if (!ec) {
    m.gauge("process_open_fds", "Number of open file descriptors.");
    m.sample(static_cast<double>(fds));
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    m.gauge("process_max_fds", "Maximum number of open file descriptors.");
    m.sample(static_cast<double>(limit.rlim_cur));
  }
}

}  // namespace

namespace {

// /api/status: an upstream's idempotency policy and its store's size (memory; Redis keeps its
// own numbers).
json::object idempotency_status(const idempotency::Guard& g) {
  json::object o;
  o["mode"] = idempotency::to_string(g.config().mode);
  o["header"] = g.header();
  o["store"] = g.backing().store_name;
  const auto stats = g.backing().store->stats();
  if (stats.known) {
    o["entries"] = stats.entries;
    o["bytes"] = stats.bytes;
    o["evictions"] = stats.evictions;
  }
  return o;
}

void idempotency_metrics(telemetry::MetricsText& m, const Snapshot& snapshot) {
  m.counter("sluice_idempotency_total",
            "Requests with an Idempotency-Key, by upstream and outcome (docs/idempotency.md).");
  for (const auto& u : snapshot.upstreams)
    if (const auto* g = u->idempotency())
      for (std::size_t o = 1; o < idempotency::outcome_count; ++o) {
        const auto outcome = static_cast<idempotency::Outcome>(o);
        m.sample({{"upstream", u->name()}, {"outcome", idempotency::to_string(outcome)}},
                 static_cast<double>(g->backing().total(outcome)));
      }
  m.gauge("sluice_idempotency_store_bytes", "Bytes held by an upstream's memory idempotency store.");
  for (const auto& u : snapshot.upstreams)
    if (const auto* g = u->idempotency())
      if (const auto stats = g->backing().store->stats(); stats.known)
        m.sample({{"upstream", u->name()}}, static_cast<double>(stats.bytes));
  m.counter("sluice_idempotency_evictions_total",
            "Entries evicted from an upstream's memory idempotency store to stay within memory_limit.");
  for (const auto& u : snapshot.upstreams)
    if (const auto* g = u->idempotency())
      if (const auto stats = g->backing().store->stats(); stats.known)
        m.sample({{"upstream", u->name()}}, static_cast<double>(stats.evictions));
}

// A server's health as /api/status shows it: its state, why, and the last probe.
void add_health(json::object& so, const Endpoint& ep, Clock::time_point now) {
  const auto h = ep.health().status();
  so["state"] = shown_state(ep);
  so["health_state"] = to_string(h.state);
  so["reason"] = h.reason;
  so["since_ms_ago"] = ms_since(h.since, now);
  so["ejections"] = h.ejections;
  so["consecutive_passes"] = h.consecutive_passes;
  so["consecutive_failures"] = h.consecutive_failures;
  if (!h.last_probe) {
    so["last_probe"] = nullptr;
    return;
  }
  json::object p;
  p["passed"] = h.last_probe->passed;
  p["detail"] = h.last_probe->detail;
  p["latency_ms"] = std::chrono::duration<double, std::milli>(h.last_probe->latency).count();
  p["ms_ago"] = ms_since(h.last_probe->at, now);
  so["last_probe"] = std::move(p);
}

// One server of /api/status: where it is and came from, its weights, load, drain and counts.
json::object server_status(const Endpoint& ep, const config::ServerConfig& server,
                           const json::array& discovered, unsigned workers, Clock::time_point now) {
  json::object so;
  so["identity"] = ep.identity();
  so["address"] = ep.address_text();
  add_origin(so, server, discovered);
  so["tls"] = ep.tls();
  so["weight"] = ep.weight();
  so["effective_weight"] = static_cast<double>(ep.effective_weight_milli()) / 1000.0;
  so["backup"] = ep.backup();
  so["max_conns"] = ep.max_conns();
  const auto in_flight = ep.in_flight();
  so["in_flight"] = in_flight;  // tunnels included
  so["tunnels"] = ep.tunnels();
  so["draining"] = ep.draining();
  so["drain_source"] = !ep.draining() ? "" : ep.drained_by_api() ? "api" : "config";
  so["drained"] = ep.draining() && in_flight == 0;
  std::uint64_t requests = 0;
  for (std::size_t c = 0; c < EndpointCounters::response_slots; ++c)
    requests += sum(ep, workers, [c](const EndpointCounters& k) -> const auto& { return k.responses[c]; });
  so["requests"] = requests;
  so["failures"] = sum(ep, workers, [](const EndpointCounters& k) -> const auto& { return k.failures; });
  so["first_byte_ewma_ms"] = ep.first_byte_time().last() / 1e6;  // 0: never answered
  if (ep.has_health()) add_health(so, ep, now);
  return so;
}

// Each server's load, and the tunnels: open, and closed by reason.
void server_metrics(telemetry::MetricsText& m, const Snapshot& snapshot, unsigned workers) {
  m.gauge("sluice_upstream_in_flight", "Requests in flight to a server, across workers.");
  for (const auto& u : snapshot.upstreams)
    for (Endpoint* ep : u->endpoints())
      m.sample({{"upstream", u->name()}, {"server", ep->identity()}}, static_cast<double>(ep->in_flight()));
  m.gauge("sluice_upstream_first_byte_ewma_seconds",
          "A server's time to first response byte, peak EWMA (least_time's estimate); 0 = never answered.");
  for (const auto& u : snapshot.upstreams)
    for (Endpoint* ep : u->endpoints())
      m.sample({{"upstream", u->name()}, {"server", ep->identity()}}, ep->first_byte_time().last() / 1e9);
  m.gauge("sluice_tunnels", "Upgrade tunnels (WebSocket) open to a server, across workers; also counted in sluice_upstream_in_flight.");
  for (const auto& u : snapshot.upstreams)
    for (Endpoint* ep : u->endpoints())
      m.sample({{"upstream", u->name()}, {"server", ep->identity()}}, static_cast<double>(ep->tunnels()));
  m.counter("sluice_tunnels_closed_total",
            "Upgrade tunnels ended, by upstream and reason (closed: by a peer; idle: tunnel_idle_timeout; drain: tunnel_drain_timeout).");
  for (const auto& u : snapshot.upstreams) {
    static constexpr const char* reasons[3] = {"closed", "idle", "drain"};
    for (std::size_t r = 0; r < 3; ++r) {
      std::uint64_t v = 0;
      for (Endpoint* ep : u->endpoints())
        v += sum(*ep, workers, [r](const EndpointCounters& k) -> const auto& { return k.tunnels_closed[r]; });
      m.sample({{"upstream", u->name()}, {"reason", reasons[r]}}, static_cast<double>(v));
    }
  }
}

// sluice_server_state: 1 for the state each server is in, draining over the health state.
void server_state_metrics(telemetry::MetricsText& m, const Snapshot& snapshot) {
  m.gauge("sluice_server_state", "1 for the server's current state.");
  static constexpr ServerState states[] = {ServerState::up, ServerState::down, ServerState::ejected,
                                           ServerState::slow_start};
  for (const auto& u : snapshot.upstreams)
    for (Endpoint* ep : u->endpoints()) {
      for (const auto st : states)
        m.sample({{"upstream", u->name()}, {"server", ep->identity()}, {"state", to_string(st)}},
                 !ep->draining() && ep->state() == st ? 1 : 0);
      m.sample({{"upstream", u->name()}, {"server", ep->identity()}, {"state", "draining"}},
               ep->draining() ? 1 : 0);
    }
}

// Retries made, by the failure retried, and retries not made, by why not.
void retry_metrics(telemetry::MetricsText& m, const Snapshot& snapshot, unsigned workers) {
  m.counter("sluice_retries_total", "Retries made, by upstream and the failure retried.");
  for (const auto& u : snapshot.upstreams)
    for (std::size_t f = 0; f < proxy::failure_kind_count; ++f) {
      if (f == static_cast<std::size_t>(proxy::FailureKind::client_failed)) continue;  // never retried
      std::uint64_t v = 0;
      for (Endpoint* ep : u->endpoints())
        v += sum(*ep, workers, [f](const EndpointCounters& k) -> const auto& { return k.retries[f]; });
      const auto reason = f == 0 ? std::string_view("status") : health::describe(static_cast<proxy::FailureKind>(f));
      m.sample({{"upstream", u->name()}, {"reason", snake_case(reason)}}, static_cast<double>(v));
    }
  m.counter("sluice_retries_skipped_total", "Retries not made, by upstream and reason.");
  for (const auto& u : snapshot.upstreams)
    for (std::size_t r = 1; r < proxy::retry_skip_count; ++r) {
      std::uint64_t v = 0;
      for (Endpoint* ep : u->endpoints())
        v += sum(*ep, workers, [r](const EndpointCounters& k) -> const auto& { return k.retry_skips[r]; });
      m.sample({{"upstream", u->name()}, {"reason", snake_case(proxy::describe(static_cast<proxy::RetrySkip>(r)))}},
               static_cast<double>(v));
    }
}

// An upstream's passive ejections, made or refused, summed over its servers.
template <class Count>
void ejection_samples(telemetry::MetricsText& m, const Snapshot& snapshot, Count count) {
  for (const auto& u : snapshot.upstreams) {
    std::uint64_t v = 0;
    for (Endpoint* ep : u->endpoints())
      if (ep->has_health()) v += count(ep->health().status());
    m.sample({{"upstream", u->name()}}, static_cast<double>(v));
  }
}

// Active probes by result, and passive ejections.
void health_metrics(telemetry::MetricsText& m, const Snapshot& snapshot) {
  m.counter("sluice_health_checks_total", "Active probes, by result.");
  for (const auto& u : snapshot.upstreams)
    for (Endpoint* ep : u->endpoints()) {
      m.sample({{"upstream", u->name()}, {"server", ep->identity()}, {"result", "pass"}},
               static_cast<double>(ep->probes_passed.load()));
      m.sample({{"upstream", u->name()}, {"server", ep->identity()}, {"result", "fail"}},
               static_cast<double>(ep->probes_failed.load()));
    }
  m.counter("sluice_ejections_total", "Passive ejections, by upstream.");
  ejection_samples(m, snapshot, [](const auto& status) { return status.ejections; });
  m.counter("sluice_ejections_refused_total",
            "Passive ejections refused by max_ejected_percent (the server stayed in), by upstream.");
  ejection_samples(m, snapshot, [](const auto& status) { return status.ejections_refused; });
}

// What the process counts outside the servers: reloads and rollbacks, access log lines lost,
// TLS listener handshakes.
void process_counters(telemetry::MetricsText& m, const RuntimeControl::Hooks& hooks,
                      const Snapshot& snapshot) {
  m.counter("sluice_config_reloads_total", "Configuration reloads, by result.");
  m.sample({{"result", "success"}}, static_cast<double>(hooks.reloads_ok()));
  m.sample({{"result", "failure"}}, static_cast<double>(hooks.reloads_failed()));
  if (hooks.rollbacks) {
    m.counter("sluice_config_rollbacks_total",
              "Reloads rolled back by their watch ([reload] watch): a clear breach of the failed "
              "share or of the servers up after the reload.");
    m.sample(static_cast<double>(hooks.rollbacks()));
  }
  if (hooks.access_log_dropped) {
    m.counter("sluice_access_log_dropped_total",
              "Access log lines dropped because the worker's buffer was full (output too slow or blocked).");
    m.sample(static_cast<double>(hooks.access_log_dropped()));
  }
  if (!snapshot.config->server.tls.empty() && hooks.tls_handshakes) {
    const auto [ok, failed] = hooks.tls_handshakes();
    m.counter("sluice_tls_handshakes_total", "TLS handshakes on TLS listeners, completed.");
    m.sample(static_cast<double>(ok));
    m.counter("sluice_tls_handshake_failures_total",
              "TLS handshakes on TLS listeners that failed or timed out (logged at debug).");
    m.sample(static_cast<double>(failed));
  }
}

// Open connections on each side, and the parked client connections among them.
void connection_metrics(telemetry::MetricsText& m, const RuntimeControl::Hooks& hooks) {
  m.gauge("sluice_connections", "Open connections, by side.");
  m.sample({{"side", "client"}}, static_cast<double>(hooks.client_connections()));
  if (hooks.upstream_connections)
    if (const auto n = hooks.upstream_connections())
      m.sample({{"side", "upstream"}}, static_cast<double>(*n));
  if (hooks.parked_connections) {
    m.gauge("sluice_parked_connections",
            "Idle keep-alive client connections parked without a session, across workers; also in "
            "sluice_connections{side=\"client\"}.");
    m.sample(static_cast<double>(hooks.parked_connections()));
  }
}

}  // namespace

const char* shown_state(const Endpoint& endpoint) {
  if (endpoint.draining()) return endpoint.in_flight() == 0 ? "drained" : "draining";
  return to_string(endpoint.state());
}

RuntimeControl::RuntimeControl(Hooks hooks) : hooks_(std::move(hooks)) {}

std::string RuntimeControl::status_json() {
  const auto snapshot = hooks_.snapshot();
  const auto now = steady_clock().now();
  const unsigned workers = hooks_.workers();
  json::object root;
  root["config_version"] = snapshot->version;
  root["config_file"] = snapshot->config->source;
  root["loaded_ms_ago"] = ms_since(hooks_.loaded_at(), now);
  json::array upstreams;
  for (const auto& u : snapshot->upstreams) {
    json::object uo;
    uo["name"] = u->name();
    uo["balance"] = config::name_of(u->config().balance);
    uo["queued"] = u->queue().size();
    json::array servers;
    const auto discovered = hooks_.discovery_status ? hooks_.discovery_status(u->name()) : json::array();
    for (std::size_t i = 0; i < u->endpoints().size(); ++i)
      servers.push_back(server_status(*u->endpoint(static_cast<std::uint32_t>(i)),
                                      u->config().servers[i], discovered, workers, now));
    uo["servers"] = std::move(servers);
    if (const auto* g = u->idempotency()) uo["idempotency"] = idempotency_status(*g);
    if (!discovered.empty()) uo["discovery"] = discovered;
    upstreams.push_back(std::move(uo));
  }
  root["upstreams"] = std::move(upstreams);
  if (hooks_.reload_watch) root["reload"] = hooks_.reload_watch();
  return json::serialize(root);
}

std::string RuntimeControl::metrics_text() {
  const auto snapshot = hooks_.snapshot();
  const unsigned workers = hooks_.workers();
  telemetry::MetricsText m;
  m.gauge("sluice_build_info", "Build information.").sample({{"version", SLUICE_VERSION}}, 1);
  request_metrics(m, *snapshot, workers);
  server_metrics(m, *snapshot, workers);
  server_state_metrics(m, *snapshot);
  retry_metrics(m, *snapshot, workers);
  idempotency_metrics(m, *snapshot);
  health_metrics(m, *snapshot);
  if (hooks_.discovery_metrics) hooks_.discovery_metrics(m);
  process_counters(m, hooks_, *snapshot);
  edge_metrics(m, *snapshot);
  connection_metrics(m, hooks_);
  process_metrics(m);
  return m.take();
}

std::string RuntimeControl::config_text() { return hooks_.snapshot()->config->text; }

std::string RuntimeControl::config_source() { return hooks_.snapshot()->config->source; }

admin::DrainOutcome RuntimeControl::set_drain(const std::string& upstream, const std::string& server,
                                              bool drain) {
  const auto snapshot = hooks_.snapshot();
  for (const auto& u : snapshot->upstreams) {
    if (u->name() != upstream) continue;
    for (Endpoint* ep : u->endpoints()) {
      if (ep->identity() != server) continue;
      ep->set_draining(drain);
      ep->set_drained_by_api(drain);
      hooks_.drained(upstream, *ep, drain);
      return admin::DrainOutcome::done;
    }
    return admin::DrainOutcome::no_such_server;
  }
  return admin::DrainOutcome::no_such_upstream;
}

bool RuntimeControl::ready() { return hooks_.ready(); }

}  // namespace sluice
