// [upstreams.NAME.health] (active probes) and [upstreams.NAME.passive] (live traffic's failures).
#include <algorithm>

#include "reader.hpp"
#include "sluice/config/units.hpp"

namespace sluice::config {

namespace health_section {

using H = HealthCheckConfig;
using P = PassiveConfig;

// Both go into the probe's request line and Host header as written.
bool visible(const std::string& v) {
  return std::all_of(v.begin(), v.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

const H& hc(const void* h) { return *static_cast<const H*>(h); }

void read_expect_status(Reader& r, const toml::node& node, const std::string& path, health::StatusMatcher& out) {
  std::string expect, why;
  if (!r.take_string(node, path, expect)) return;
  if (auto statuses = health::StatusMatcher::parse(expect, &why)) out = *statuses;
  else r.error(node, path, why);
}

void read_fail_on(Reader& r, const toml::node& node, const std::string& path, health::FailOn& out) {
  std::vector<std::string> items;
  if (!r.take_strings(node, path, items)) return;
  r.check_failure_items(node, path, items, nullptr);
  if (auto parsed = health::FailOn::parse(items)) out = *parsed;
}

const KeySpec health_rows[] = {
    choice_key<&H::protocol>("protocol", "probe protocol",
                             "What probes speak: \"http\" (a request to path) or \"grpc\" (grpc.health.v1.Health/Check)."),
    string_key<&H::service>("service", "gRPC: the service whose health is asked; \"\" = the server as a whole.")
        .rule([](const void* h) -> std::string {
          if (hc(h).service.empty() || hc(h).protocol == ProbeProtocol::grpc) return {};
          return "applies to gRPC probes only; set protocol = \"grpc\"";
        }),
    string_key<&H::path>("path", "The probe's request path.").rule([](const void* h) -> std::string {
      const auto& path = hc(h).path;
      if (path.starts_with('/') && visible(path)) return {};
      return "must start with '/' and hold no spaces or control characters, got '" + path + "'";
    }),
    choice_key<&H::method>("method", "probe method", "The probe's method."),
    string_key<&H::host>("host", "The probe's Host header; \"\" = the server's address.")
        .rule([](const void* h) -> std::string {
          return visible(hc(h).host) ? "" : "must hold no spaces or control characters";
        }),
    integer_key<&H::port>("port", 0, 65535, "Probe another port; 0 = the server's."),
    duration_key<&H::interval>("interval", false, "Between probes of one server."),
    duration_key<&H::timeout>("timeout", false, "A probe's answer must come within this (< interval).")
        .rule([](const void* h) -> std::string {
          const auto& c = hc(h);
          if (c.timeout < c.interval) return {};
          return "must be shorter than interval (" + format_duration(c.interval) + "), got " + format_duration(c.timeout);
        }, true),
    integer_key<&H::rise>("rise", 1, 100, "Good probes in a row that bring a server up."),
    integer_key<&H::fall>("fall", 1, 100, "Bad probes in a row that take it down."),
    value_key<&H::expect_status, read_expect_status, [](const health::StatusMatcher& m) { return toml_string(m.to_string()); }>(
        "expect_status", "Statuses that count as healthy.")
        .docs("string"),
    string_key<&H::expect_body>("expect_body", "A substring the body must hold; \"\" = any.")
        .rule([](const void* h) -> std::string {
          if (hc(h).expect_body.empty()) return {};
          if (hc(h).protocol == ProbeProtocol::grpc) return "a gRPC probe is judged by its health status, not a body";
          if (hc(h).method != ProbeMethod::head) return {};
          return "a HEAD probe has no body to match; use method = \"GET\"";
        }),
    number_key<&H::jitter>("jitter", 0.0, 0.5, "Random share added to the interval."),
    choice_key<&H::initial_state>("initial_state", "initial state", "A new server's state before its first probe."),
};

const KeySpec passive_rows[] = {
    integer_key<&P::max_fails>("max_fails", 0, 1000, "Failures within fail_timeout that eject; 0 = off."),
    duration_key<&P::fail_timeout>("fail_timeout", false, "The window failures are counted in."),
    duration_key<&P::max_ejection_time>("max_ejection_time", false, "The longest ejection."),
    integer_key<&P::max_ejected_percent>("max_ejected_percent", 0, 100, "At most this share ejected at once."),
    value_key<&P::fail_on, read_fail_on, [](const health::FailOn& f) { return f.to_string(); }>(
        "fail_on", "What counts as a failure.")
        .docs("array of strings"),
};

}  // namespace health_section

const KeyTable health_table = health_section::health_rows;
const KeyTable passive_table = health_section::passive_rows;

void read_health(Reader& r, const toml::node& node, const std::string& path, std::optional<HealthCheckConfig>& out) {
  const toml::table* table = r.table_at(&node, path);
  if (table == nullptr) return;
  HealthCheckConfig h;
  r.walk(*table, path, health_table, &h);
  r.record(*table, path, health_table, &h);
  out = std::move(h);
}

// Absent: the defaults (passive checks are on).
void read_passive(Reader& r, const toml::node& node, const std::string& path, PassiveConfig& out) {
  const toml::table* table = r.table_at(&node, path);
  if (table == nullptr) return;
  r.walk(*table, path, passive_table, &out);
  r.record(*table, path, passive_table, &out);
}

}  // namespace sluice::config
