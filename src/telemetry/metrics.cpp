#include "sluice/telemetry/metrics.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace sluice::telemetry {

namespace {

std::string_view type_name(MetricType type) {
  switch (type) {
    case MetricType::counter:
      return "counter";
    case MetricType::gauge:
      return "gauge";
    case MetricType::histogram:
      return "histogram";
  }
  return "untyped";
}

bool name_start(char c, bool colon_allowed) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         (colon_allowed && c == ':');
}

bool name_char(char c, bool colon_allowed) {
  return name_start(c, colon_allowed) || (c >= '0' && c <= '9');
}

// Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*; label names the same without ':'.
void check_name(std::string_view name, bool is_metric) {
  const bool ok =
      !name.empty() && name_start(name.front(), is_metric) &&
      std::all_of(name.begin(), name.end(), [&](char c) { return name_char(c, is_metric); });
  if (!ok) {
    throw std::logic_error(
        std::string(is_metric ? "invalid metric name '" : "invalid label name '") +
        std::string(name) + "'");
  }
}

// Label values escape backslash, double quote and line feed; HELP text only backslash and
// line feed (format 0.0.4).
void append_escaped(std::string& out, std::string_view text, bool quote) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

// `name{a="x",b="y"}` (no braces without labels); `extra` is one more label written last (le).
void append_series(std::string& out, std::string_view name, std::string_view suffix,
                   std::span<const Label> labels, const Label* extra) {
  out += name;
  out += suffix;
  if (labels.empty() && extra == nullptr) return;
  out += '{';
  bool first = true;
  const auto append_label = [&](const Label& label) {
    if (!first) out += ',';
    first = false;
    out += label.name;
    out += "=\"";
    append_escaped(out, label.value, true);
    out += '"';
  };
  for (const auto& label : labels) append_label(label);
  if (extra != nullptr) append_label(*extra);
  out += '}';
}

void append_line_end(std::string& out, std::string_view value) {
  out += ' ';
  out += value;
  out += '\n';
}

}  // namespace

std::string format_metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  std::array<char, 32> buffer;
  const auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  // 32 characters hold any double's shortest form ("-2.2250738585072014e-308" is 24).
  return ec == std::errc{} ? std::string(buffer.data(), end) : "NaN";
}

MetricsText& MetricsText::counter(std::string_view name, std::string_view help) {
  return family(name, help, MetricType::counter);
}

MetricsText& MetricsText::gauge(std::string_view name, std::string_view help) {
  return family(name, help, MetricType::gauge);
}

MetricsText& MetricsText::histogram(std::string_view name, std::string_view help) {
  return family(name, help, MetricType::histogram);
}

MetricsText& MetricsText::family(std::string_view name, std::string_view help, MetricType type) {
  const auto it = std::find_if(families_.begin(), families_.end(),
                               [&](const Family& f) { return f.name == name; });
  if (it != families_.end()) {
    if (it->type != type) {
      throw std::logic_error("metric '" + std::string(name) + "' declared as " +
                             std::string(type_name(it->type)) + " and as " +
                             std::string(type_name(type)));
    }
    current_ = static_cast<std::size_t>(it - families_.begin());
    return *this;
  }
  check_name(name, true);
  families_.push_back({std::string(name), std::string(help), type, {}});
  current_ = families_.size() - 1;
  return *this;
}

MetricsText::Family& MetricsText::current(MetricType expected, std::string_view what) {
  if (current_ >= families_.size()) throw std::logic_error("metric sample before any family");
  Family& family = families_[current_];
  const bool ok = expected == MetricType::histogram ? family.type == MetricType::histogram
                                                    : family.type != MetricType::histogram;
  if (!ok) {
    throw std::logic_error(std::string(what) + " sample for " +
                           std::string(type_name(family.type)) + " '" + family.name + "'");
  }
  return family;
}

MetricsText& MetricsText::sample(std::span<const Label> labels, double value) {
  Family& family = current(MetricType::counter, "plain");
  for (const auto& label : labels) check_name(label.name, false);
  append_series(family.samples, family.name, "", labels, nullptr);
  append_line_end(family.samples, format_metric_value(value));
  return *this;
}

MetricsText& MetricsText::sample(std::span<const Label> labels, const HistogramSample& histogram) {
  Family& family = current(MetricType::histogram, "histogram");
  if (histogram.counts.size() != histogram.bounds.size() + 1) {
    throw std::logic_error("histogram '" + family.name +
                           "': counts must have one entry more than bounds");
  }
  for (const auto& label : labels) {
    check_name(label.name, false);
    if (label.name == "le")
      throw std::logic_error("histogram '" + family.name + "': label 'le' is reserved");
  }
  std::string& out = family.samples;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= histogram.bounds.size(); ++i) {
    cumulative += histogram.counts[i];
    const std::string le =
        i < histogram.bounds.size() ? format_metric_value(histogram.bounds[i]) : "+Inf";
    const Label bucket{"le", le};
    append_series(out, family.name, "_bucket", labels, &bucket);
    append_line_end(out, std::to_string(cumulative));
  }
  append_series(out, family.name, "_sum", labels, nullptr);
  append_line_end(out, format_metric_value(histogram.sum));
  append_series(out, family.name, "_count", labels, nullptr);
  append_line_end(out, std::to_string(cumulative));
  return *this;
}

std::string MetricsText::str() const {
  std::string out;
  for (const auto& family : families_) {
    out += "# HELP ";
    out += family.name;
    out += ' ';
    append_escaped(out, family.help, false);
    out += "\n# TYPE ";
    out += family.name;
    out += ' ';
    out += type_name(family.type);
    out += '\n';
    out += family.samples;
  }
  return out;
}

std::string MetricsText::take() {
  std::string out = str();
  families_.clear();
  current_ = static_cast<std::size_t>(-1);
  return out;
}

}  // namespace sluice::telemetry
