// GET /api/dashboard: what the dashboard page shows, built on the control thread from the
// snapshot, the health states, the per-second History and the events ring. Sized for 1,000
// servers: one compact row per server, and only the history samples and events the page does not
// have yet (docs/dashboard.md has the measured cost).
#include <boost/json.hpp>

#include "sluice/health/server_health.hpp"
#include "sluice/proxy/h2_session.hpp"
#include "sluice/runtime/control.hpp"
#include "sluice/runtime/fleet.hpp"
#include "sluice/telemetry/event_ring.hpp"
#include "sluice/tls/acme_slot.hpp"

namespace sluice {

namespace json = boost::json;

namespace {

double ms_between(Clock::time_point earlier, Clock::time_point now) {
  return std::chrono::duration<double, std::milli>(now - earlier).count();
}

// Latencies and rates to 0.1: the page shows no more, and the payload stays small.
json::value rounded(std::optional<double> v) {
  if (!v) return nullptr;
  return std::round(*v * 10.0) / 10.0;
}

json::object server_row(const Endpoint& ep, const History& history, Clock::time_point now) {
  json::object so;
  so["identity"] = ep.identity();
  so["address"] = ep.address_text();
  so["state"] = shown_state(ep);
  so["draining"] = ep.draining();
  so["weight"] = ep.weight();
  so["effective_weight"] = static_cast<double>(ep.effective_weight_milli()) / 1000.0;
  so["backup"] = ep.backup();
  so["in_flight"] = ep.in_flight();
  const ServerRates r = history.rates(ep);
  so["rps"] = rounded(r.rps);
  so["error_rate"] = std::round(r.error_rate * 10000.0) / 10000.0;
  so["p50_ms"] = rounded(r.p50_ms);
  so["p99_ms"] = rounded(r.p99_ms);
  // least_time's estimate of the server's time to first byte (docs/balancing.md); none under
  // other policies, which do not keep it.
  const double first_byte_ns = ep.first_byte_time().last();
  so["first_byte_ewma_ms"] = first_byte_ns > 0 ? rounded(first_byte_ns / 1e6) : json::value(nullptr);
  so["retries"] = r.retries;
  so["pooled"] = r.pooled;
  if (ep.has_health()) {
    const auto h = ep.health().status();
    so["health_state"] = to_string(h.state);
    so["reason"] = h.reason;
    so["since_ms_ago"] = std::round(ms_between(h.since, now));
    so["ejections"] = h.ejections;
  }
  return so;
}

// The seconds of `ring` after tick `after`, as three parallel arrays.
json::object chart(const telemetry::SampleRing<UpstreamSecond>* ring, std::uint64_t after) {
  json::array rps, errors, p99;
  std::uint64_t first = 0;
  for (std::size_t i = 0; ring != nullptr && i < ring->size(); ++i) {
    const auto& s = (*ring)[i];
    if (s.tick <= after) continue;
    if (first == 0) first = s.tick;
    rps.emplace_back(s.requests);
    errors.emplace_back(s.errors);
    p99.emplace_back(rounded(s.p99_ms));
  }
  return {{"first_tick", first}, {"rps", std::move(rps)}, {"errors", std::move(errors)},
          {"p99_ms", std::move(p99)}};
}

json::array events_after(std::uint64_t after, Clock::time_point now) {
  json::array out;
  for (const auto& e : telemetry::events().since(after)) {
    out.push_back(json::object{{"seq", e.seq},
                               {"ms_ago", std::round(ms_between(e.at, now))},
                               {"kind", e.kind},
                               {"upstream", e.upstream},
                               {"server", e.server},
                               {"text", e.text}});
  }
  return out;
}

// The ACME certificates: days until each expires (to 0.1; null until one is issued) and the
// last failure, so that a renewal that keeps failing shows before the certificate expires.
json::array certificate_rows() {
  json::array out;
  const auto now = std::chrono::system_clock::now();
  for (const auto& slot : tls::acme::all_slots()) {
    const auto status = slot->status();
    json::value days = nullptr;
    if (status.not_after)
      days = std::round(std::chrono::duration<double>(*status.not_after - now).count() / 8640.0) / 10.0;
    json::value retry = nullptr;
    if (status.next_attempt)
      retry = std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::seconds>(*status.next_attempt - now).count());
    out.push_back(json::object{{"domains", json::value_from(slot->domains())},
                               {"days_to_expiry", days},
                               {"failures", status.failures},
                               {"last_error", status.last_error},
                               {"retry_in_s", retry}});
  }
  return out;
}

}  // namespace

std::string RuntimeControl::dashboard_json(const admin::DashboardQuery& query) {
  const auto snapshot = process_.snapshot();
  const History& history = process_.history();
  const auto now = steady_clock().now();
  json::object root;
  root["config_version"] = snapshot->version;
  root["config_file"] = snapshot->config->source;
  root["tick"] = history.tick();
  json::array upstreams;
  for (const auto& u : snapshot->upstreams) {
    json::array servers;
    servers.reserve(u->endpoints().size());
    for (const Endpoint* ep : u->endpoints()) servers.push_back(server_row(*ep, history, now));
    upstreams.push_back(json::object{{"name", u->name()},
                                     {"balance", config::name_of(u->config().balance)},
                                     {"protocol", config::name_of(u->config().protocol)},
                                     {"servers", std::move(servers)},
                                     {"history", chart(history.seconds(u->name()), query.after_tick)}});
  }
  root["upstreams"] = std::move(upstreams);
  root["http2"] = json::object{{"connections", proxy::http2_open_connections()}, {"streams", proxy::http2_open_streams()}};
  root["certificates"] = certificate_rows();
  root["events"] = events_after(query.after_event, now);
  // Fleet mode: the fleet panel shows /api/fleet as it is.
  if (const auto* fleet = process_.fleet()) root["fleet"] = fleet->status();
  return json::serialize(root);
}

}  // namespace sluice
