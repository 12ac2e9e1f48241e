#pragma once
// GET /metrics as one table: every metric family sluice exposes, in the order of the exposition,
// with its type, its HELP text, when it is present and how its samples are read. The text is
// rendered from the table alone (telemetry/metrics.hpp writes the format). docs/admin.md lists
// the same families for operators. Control thread only (a scrape).
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sluice/core/clock.hpp"
#include "sluice/telemetry/metrics.hpp"

namespace sluice {

class RunningProcess;
struct Snapshot;
class Upstream;
class Endpoint;

// This process's figures from /proc/self and getrlimit, read once per scrape; a figure that
// could not be read is left out of the exposition.
struct ProcessFigures {
  std::optional<double> cpu_seconds, resident_bytes, start_time, open_fds, max_fds;
  static ProcessFigures read();
};

// What one scrape reads: fixed when GET /metrics starts.
struct Scrape {
  const Snapshot& snapshot;
  const RunningProcess& process;
  unsigned slots;  // worker counter slots to sum: the running workers, at most max_worker_slots
  Clock::time_point now;
  ProcessFigures figures;
};

// One metric family. Its samples come from exactly one of the readers: `value` (one sample, no
// labels), `per_upstream` ({upstream}), `per_server` ({upstream, server}), or `samples`, which
// writes the family's own label sets. A family that is shown has its HELP and TYPE lines even
// without a sample.
struct MetricFamily {
  std::string_view name;
  telemetry::MetricType type;
  std::string_view help;
  bool (*shown)(const Scrape&) = nullptr;  // null: always
  double (*value)(const Scrape&) = nullptr;
  double (*per_upstream)(const Scrape&, const Upstream&) = nullptr;
  double (*per_server)(const Scrape&, const Endpoint&) = nullptr;
  void (*samples)(const Scrape&, telemetry::MetricsText&) = nullptr;
};

std::span<const MetricFamily> metric_families();

// The exposition of `scrape` (Prometheus text format 0.0.4).
std::string render_metrics(const Scrape& scrape);

}  // namespace sluice
