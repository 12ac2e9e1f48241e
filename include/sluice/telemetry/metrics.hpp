#pragma once
// Builds a Prometheus text exposition (format 0.0.4) for GET /metrics:
//
//   MetricsText m;
//   m.counter("sluice_requests_total", "Requests answered, by upstream, server and status.")
//       .sample({{"upstream", "app"}, {"server", "app-1"}, {"code", "200"}}, 1027);
//   m.histogram("sluice_request_duration_seconds", "Request duration.")
//       .sample({{"upstream", "app"}}, HistogramSample{bounds, counts, sum});
//   std::string body = m.take();
//
// Each family (name) gets its `# HELP` and `# TYPE` lines once, and all of its samples are
// written together under them even when samples are added after other families (the format
// requires a family's lines to be contiguous). Families come out in the order they were first
// declared. Label values are escaped (\\, \", \n); HELP text escapes \\ and \n.
//
// Misuse (an invalid metric or label name, a family re-declared with another type, a sample with
// no family declared, a histogram sample on a counter) is a programming error and throws
// std::logic_error. Control thread only (a scrape); it allocates freely.
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::telemetry {

struct Label {
  std::string_view name;
  std::string_view value;
};

// One histogram series. `counts[i]` is the number of observations in (bounds[i-1], bounds[i]]
// (NOT cumulative: the data path increments one bucket per observation); counts has one more
// entry than bounds, the last one counting observations above the largest bound. Bounds are
// ascending. The builder writes the cumulative `_bucket{le=...}` lines, `le="+Inf"`, `_sum`
// and `_count` (= the total of counts).
struct HistogramSample {
  std::span<const double> bounds;
  std::span<const std::uint64_t> counts;
  double sum = 0;
};

enum class MetricType { counter, gauge, histogram };

class MetricsText {
public:
  // Selects family `name` for the following samples, declaring it on first use.
  MetricsText& counter(std::string_view name, std::string_view help);
  MetricsText& gauge(std::string_view name, std::string_view help);
  MetricsText& histogram(std::string_view name, std::string_view help);
  MetricsText& family(std::string_view name, std::string_view help, MetricType type);

  // A sample of the selected counter or gauge family.
  MetricsText& sample(double value) { return sample(std::span<const Label>{}, value); }
  MetricsText& sample(std::initializer_list<Label> labels, double value) {
    return sample(std::span<const Label>(labels.begin(), labels.size()), value);
  }
  MetricsText& sample(std::span<const Label> labels, double value);

  // A series of the selected histogram family.
  MetricsText& sample(std::initializer_list<Label> labels, const HistogramSample& histogram) {
    return sample(std::span<const Label>(labels.begin(), labels.size()), histogram);
  }
  MetricsText& sample(std::span<const Label> labels, const HistogramSample& histogram);

  // The exposition text so far; take() leaves the builder empty.
  std::string str() const;
  std::string take();

private:
  struct Family {
    std::string name;
    std::string help;
    MetricType type;
    std::string samples;  // rendered sample lines, each ending in '\n'
  };

  Family& current(MetricType expected, std::string_view what);

  std::vector<Family> families_;
  std::size_t current_ = static_cast<std::size_t>(-1);
};

// Number formatting of the exposition format: shortest round-trip form ("42", "0.005",
// "1e+21"), and "+Inf", "-Inf", "NaN".
std::string format_metric_value(double value);

}  // namespace sluice::telemetry
