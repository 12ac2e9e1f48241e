#include "sluice/runtime/fleet_state.hpp"

#include <algorithm>
#include <cmath>
#include <boost/json.hpp>

namespace sluice::fleet {

std::string instance_key(std::string_view name) {
  return std::string(key_prefix) + "instance:" + std::string(name);
}

std::string server_field(std::string_view upstream, std::string_view server) {
  return std::string(upstream) + "/" + std::string(server);
}

std::set<std::string> merged_drains(const std::set<std::string>& remote,
                                    const std::map<std::string, bool>& unpublished) {
  std::set<std::string> out = remote;
  for (const auto& [field, drained] : unpublished) {
    if (drained) out.insert(field);
    else out.erase(field);
  }
  return out;
}

std::string encode_report(const Report& report) {
  boost::json::object draining;
  for (const auto& [field, count] : report.draining) draining[field] = count;
  boost::json::array probes;
  for (const auto& field : report.probes) probes.emplace_back(field);
  boost::json::object out;
  for (const auto& [field, state] : report.out) out[field] = state;
  return boost::json::serialize(boost::json::object{{"config", report.config},
                                                    {"at_ms", report.at_ms},
                                                    {"draining", std::move(draining)},
                                                    {"probes", std::move(probes)},
                                                    {"out", std::move(out)}});
}

Report decode_report(std::string_view text) {
  Report out;
  boost::system::error_code ec;
  const auto doc = boost::json::parse(text, ec);
  const auto* o = !ec ? doc.if_object() : nullptr;
  if (o == nullptr) return out;
  if (const auto* c = o->if_contains("config"); c != nullptr && c->is_string()) out.config = std::string(c->as_string());
  if (const auto* a = o->if_contains("at_ms"); a != nullptr && a->is_int64()) out.at_ms = a->as_int64();
  if (const auto* p = o->if_contains("probes"); p != nullptr && p->is_array())
    for (const auto& field : p->as_array())
      if (field.is_string()) out.probes.emplace_back(field.as_string());
  if (const auto* s = o->if_contains("out"); s != nullptr && s->is_object())
    for (const auto& [field, state] : s->as_object())
      if (state.is_string()) out.out[std::string(field)] = std::string(state.as_string());
  const auto* d = o->if_contains("draining");
  if (d == nullptr || !d->is_object()) return out;
  for (const auto& [field, count] : d->as_object())
    if (count.is_int64()) out.draining[std::string(field)] = count.as_int64();
  return out;
}

FleetInFlight sum_in_flight(std::string_view field, std::int64_t local,
                            const std::vector<Report>& others) {
  FleetInFlight out{local, 0};
  for (const auto& r : others) {
    const auto it = r.draining.find(std::string(field));
    if (it == r.draining.end()) ++out.unconfirmed;
    else out.in_flight += it->second;
  }
  return out;
}

Disagreements verdict_disagreements(const std::string& self, const Report& mine,
                                    const std::map<std::string, Report>& others) {
  std::set<std::string> fields;
  for (const auto& [field, state] : mine.out) fields.insert(field);
  for (const auto& [name, r] : others)
    for (const auto& [field, state] : r.out) fields.insert(field);
  const auto view = [](const Report& r, const std::string& field) {
    const auto it = r.out.find(field);
    return it == r.out.end() ? std::string("in") : it->second;
  };
  Disagreements found;
  for (const auto& field : fields) {
    std::map<std::string, std::string> views{{self, view(mine, field)}};
    for (const auto& [name, r] : others) views[name] = view(r, field);
    const auto& first = views.begin()->second;
    if (std::any_of(views.begin(), views.end(), [&](const auto& v) { return v.second != first; }))
      found[field] = std::move(views);
  }
  return found;
}

std::string lease_key(std::string_view field) { return std::string(key_prefix) + "lease:" + std::string(field); }

std::size_t fair_share(std::size_t servers, std::size_t instances) {
  return instances == 0 ? servers : (servers + instances - 1) / instances;
}

std::chrono::milliseconds renew_after(std::chrono::milliseconds ttl, double jitter) {
  return std::chrono::milliseconds(std::llround(static_cast<double>(ttl.count()) * (1.0 / 3.0 - jitter / 10.0)));
}

bool string_field(const boost::json::object& record, std::string_view key, std::string& out) {
  const auto* v = record.if_contains(key);
  if (v == nullptr || !v->is_string()) return false;
  out = std::string(v->as_string());
  return true;
}

std::string encode_verdict(const Verdict& v) {
  return boost::json::serialize(boost::json::object{{"from", v.from},       {"upstream", v.upstream},
                                                    {"server", v.server},   {"passed", v.passed},
                                                    {"detail", v.detail},   {"latency_us", v.latency_us}});
}

std::optional<Verdict> decode_verdict(std::string_view text) {
  boost::system::error_code ec;
  const auto doc = boost::json::parse(text, ec);
  const auto* o = !ec ? doc.if_object() : nullptr;
  if (o == nullptr) return std::nullopt;
  const auto text_of = [o](std::string_view key, std::string& out) { return string_field(*o, key, out); };
  Verdict v;
  const auto* passed = o->if_contains("passed");
  const auto* latency = o->if_contains("latency_us");
  if (!text_of("from", v.from) || !text_of("upstream", v.upstream) || !text_of("server", v.server) ||
      !text_of("detail", v.detail) || passed == nullptr || !passed->is_bool() || latency == nullptr ||
      !latency->is_int64())
    return std::nullopt;
  v.passed = passed->as_bool();
  v.latency_us = latency->as_int64();
  return v;
}

std::chrono::milliseconds reconnect_delay(unsigned failures, double jitter) {
  constexpr std::int64_t first = 100;
  constexpr std::int64_t most = 5000;
  const std::int64_t full = failures == 0 ? 0 : std::min(most, first << std::min(failures - 1, 10u));
  return std::chrono::milliseconds(static_cast<std::int64_t>(static_cast<double>(full) * (1.0 - jitter / 2)));
}

}  // namespace sluice::fleet
