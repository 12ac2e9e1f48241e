// The admin API's view of the running process (admin::Control): status JSON, config, drain;
// the metrics are rendered in metric_table.cpp, the dashboard in dashboard.cpp. Runs on the
// control thread only.
#include "sluice/runtime/control.hpp"

#include <boost/json.hpp>

#include "sluice/discovery/discovery.hpp"
#include "sluice/health/server_health.hpp"
#include "sluice/idempotency/guard.hpp"
#include "sluice/runtime/fleet.hpp"
#include "sluice/runtime/fleet_tickets.hpp"
#include "sluice/tls/acme_slot.hpp"

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
    requests += ep.sum_counters(workers, [c](const EndpointCounters& k) -> const auto& { return k.responses[c]; });
  so["requests"] = requests;
  so["failures"] = ep.sum_counters(workers, [](const EndpointCounters& k) -> const auto& { return k.failures; });
  so["first_byte_ewma_ms"] = ep.first_byte_time().last() / 1e6;  // 0: never answered
  so["http2_connections"] = ep.h2_connections();  // protocol h2, h2c; else 0
  so["http2_goaways"] = ep.h2_goaways();
  if (ep.has_health()) add_health(so, ep, now);
  return so;
}

// Fleet mode: a draining server's requests in flight over the fleet, and how many instances
// have not shown it draining yet (`drain --wait` waits for both to be 0).
void add_fleet_in_flight(json::object& so, const Fleet& fleet, const std::string& upstream,
                         const Endpoint& ep) {
  if (!ep.draining()) return;
  const auto sum = fleet.in_flight(upstream, ep.identity(), ep.in_flight());
  so["fleet_in_flight"] = sum.in_flight;
  so["fleet_unconfirmed"] = sum.unconfirmed;
}

// Each ACME certificate: its domains, expiry, and the last failure with the next attempt.
json::array acme_status() {
  json::array out;
  const auto seconds = [](tls::acme::SystemTime t) {
    return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  };
  for (const auto& slot : tls::acme::all_slots()) {
    const auto status = slot->status();
    json::object o;
    o["domains"] = json::value_from(slot->domains());
    o["not_after"] = status.not_after ? json::value(seconds(*status.not_after)) : json::value(nullptr);
    o["failures"] = status.failures;
    o["last_error"] = status.last_error;
    o["next_attempt"] = status.next_attempt ? json::value(seconds(*status.next_attempt)) : json::value(nullptr);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

const char* shown_state(const Endpoint& endpoint) {
  if (endpoint.draining()) return endpoint.in_flight() == 0 ? "drained" : "draining";
  return to_string(endpoint.state());
}

std::string RuntimeControl::status_json() {
  const auto snapshot = process_.snapshot();
  const auto now = steady_clock().now();
  const unsigned workers = process_.workers();
  json::object root;
  root["config_version"] = snapshot->version;
  root["config_file"] = snapshot->config->source;
  root["loaded_ms_ago"] = ms_since(process_.loaded_at(), now);
  json::array upstreams;
  for (const auto& u : snapshot->upstreams) {
    json::object uo;
    uo["name"] = u->name();
    uo["balance"] = config::name_of(u->config().balance);
    uo["protocol"] = config::name_of(u->config().protocol);
    uo["queued"] = u->queue().size();
    json::array servers;
    const auto discovered = process_.discovery() ? process_.discovery()->status(u->name()) : json::array();
    for (std::size_t i = 0; i < u->endpoints().size(); ++i) {
      const Endpoint& ep = *u->endpoint(static_cast<std::uint32_t>(i));
      auto so = server_status(ep, u->config().servers[i], discovered, workers, now);
      if (const auto* fleet = process_.fleet()) add_fleet_in_flight(so, *fleet, u->name(), ep);
      servers.push_back(std::move(so));
    }
    uo["servers"] = std::move(servers);
    if (const auto* g = u->idempotency()) uo["idempotency"] = idempotency_status(*g);
    if (!discovered.empty()) uo["discovery"] = discovered;
    upstreams.push_back(std::move(uo));
  }
  root["upstreams"] = std::move(upstreams);
  root["reload"] = process_.reload_watch();
  if (auto acme = acme_status(); !acme.empty()) root["acme"] = std::move(acme);
  return json::serialize(root);
}

std::string RuntimeControl::fleet_json() {
  const auto* fleet = process_.fleet();
  if (fleet == nullptr) return {};
  auto o = fleet->status();
  if (const auto* tickets = process_.fleet_tickets()) o["ticket_keys"] = tickets->status();
  return json::serialize(o);
}

std::string RuntimeControl::config_text() { return process_.snapshot()->config->text; }

std::string RuntimeControl::config_source() { return process_.snapshot()->config->source; }

admin::DrainOutcome RuntimeControl::set_drain(const std::string& upstream, const std::string& server,
                                              bool drain) {
  const auto snapshot = process_.snapshot();
  for (const auto& u : snapshot->upstreams) {
    if (u->name() != upstream) continue;
    for (Endpoint* ep : u->endpoints()) {
      if (ep->identity() != server) continue;
      ep->set_draining(drain);
      ep->set_drained_by_api(drain);
      process_.drained(upstream, *ep, drain);
      return admin::DrainOutcome::done;
    }
    return admin::DrainOutcome::no_such_server;
  }
  return admin::DrainOutcome::no_such_upstream;
}

}  // namespace sluice
