// The Prometheus text exposition builder: exact output of every line kind.
#include "sluice/telemetry/metrics.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace sluice::telemetry {
namespace {

TEST(MetricsText, EmptyBuilderIsEmpty) { EXPECT_EQ(MetricsText().str(), ""); }

TEST(MetricsText, CounterWithLabels) {
  MetricsText m;
  m.counter("sluice_requests_total", "Requests answered.")
      .sample({{"upstream", "app"}, {"server", "app-1"}, {"code", "200"}}, 1027)
      .sample({{"upstream", "app"}, {"server", "127.0.0.1:9002"}, {"code", "502"}}, 3);
  EXPECT_EQ(m.str(),
            "# HELP sluice_requests_total Requests answered.\n"
            "# TYPE sluice_requests_total counter\n"
            "sluice_requests_total{upstream=\"app\",server=\"app-1\",code=\"200\"} 1027\n"
            "sluice_requests_total{upstream=\"app\",server=\"127.0.0.1:9002\",code=\"502\"} 3\n");
}

TEST(MetricsText, GaugeWithoutLabels) {
  MetricsText m;
  m.gauge("sluice_up", "Always 1.").sample(1);
  EXPECT_EQ(m.str(), "# HELP sluice_up Always 1.\n# TYPE sluice_up gauge\nsluice_up 1\n");
}

TEST(MetricsText, FamilyWithoutSamplesStillHasHelpAndType) {
  MetricsText m;
  m.counter("sluice_ejections_total", "Ejections.");
  EXPECT_EQ(m.str(),
            "# HELP sluice_ejections_total Ejections.\n# TYPE sluice_ejections_total counter\n");
}

TEST(MetricsText, LabelValuesAreEscaped) {
  MetricsText m;
  m.gauge("g", "h").sample({{"v", "a\\b\"c\nd"}}, 0);
  EXPECT_EQ(m.str(), "# HELP g h\n# TYPE g gauge\ng{v=\"a\\\\b\\\"c\\nd\"} 0\n");
}

TEST(MetricsText, HelpEscapesBackslashAndNewlineButNotQuotes) {
  MetricsText m;
  m.counter("c", "say \"hi\"\\now\nnext");
  EXPECT_EQ(m.str(), "# HELP c say \"hi\"\\\\now\\nnext\n# TYPE c counter\n");
}

TEST(MetricsText, HelpAndTypeOncePerFamilyAndSamplesStayTogether) {
  MetricsText m;
  m.counter("a_total", "A.").sample({{"k", "1"}}, 1);
  m.gauge("b", "B.").sample(2);
  // Back to the first family: its sample joins the first one, under the same HELP/TYPE.
  m.counter("a_total", "ignored on re-declaration").sample({{"k", "2"}}, 3);
  EXPECT_EQ(m.str(),
            "# HELP a_total A.\n# TYPE a_total counter\n"
            "a_total{k=\"1\"} 1\n"
            "a_total{k=\"2\"} 3\n"
            "# HELP b B.\n# TYPE b gauge\n"
            "b 2\n");
}

TEST(MetricsText, HistogramWritesCumulativeBucketsSumAndCount) {
  const std::array<double, 3> bounds{0.005, 0.1, 1};
  const std::array<std::uint64_t, 4> counts{2, 3, 0, 1};  // the last: above 1s
  MetricsText m;
  m.histogram("sluice_request_duration_seconds", "Duration.")
      .sample({{"upstream", "app"}}, HistogramSample{bounds, counts, 2.75});
  EXPECT_EQ(m.str(),
            "# HELP sluice_request_duration_seconds Duration.\n"
            "# TYPE sluice_request_duration_seconds histogram\n"
            "sluice_request_duration_seconds_bucket{upstream=\"app\",le=\"0.005\"} 2\n"
            "sluice_request_duration_seconds_bucket{upstream=\"app\",le=\"0.1\"} 5\n"
            "sluice_request_duration_seconds_bucket{upstream=\"app\",le=\"1\"} 5\n"
            "sluice_request_duration_seconds_bucket{upstream=\"app\",le=\"+Inf\"} 6\n"
            "sluice_request_duration_seconds_sum{upstream=\"app\"} 2.75\n"
            "sluice_request_duration_seconds_count{upstream=\"app\"} 6\n");
}

TEST(MetricsText, HistogramWithoutLabels) {
  const std::array<double, 1> bounds{0.5};
  const std::array<std::uint64_t, 2> counts{1, 0};
  MetricsText m;
  m.histogram("h", "H.").sample({}, HistogramSample{bounds, counts, 0.25});
  EXPECT_EQ(m.str(),
            "# HELP h H.\n# TYPE h histogram\n"
            "h_bucket{le=\"0.5\"} 1\n"
            "h_bucket{le=\"+Inf\"} 1\n"
            "h_sum 0.25\n"
            "h_count 1\n");
}

TEST(MetricsText, LabelsFromARuntimeVector) {
  std::vector<Label> labels{{"side", "downstream"}};
  MetricsText m;
  m.gauge("sluice_connections", "Open connections.").sample(labels, 12);
  EXPECT_EQ(m.str(),
            "# HELP sluice_connections Open connections.\n# TYPE sluice_connections gauge\n"
            "sluice_connections{side=\"downstream\"} 12\n");
}

TEST(MetricsText, TakeEmptiesTheBuilder) {
  MetricsText m;
  m.gauge("g", "G.").sample(1);
  EXPECT_FALSE(m.take().empty());
  EXPECT_EQ(m.str(), "");
  EXPECT_THROW(m.sample(1), std::logic_error);  // no family selected any more
}

TEST(MetricsText, ValueFormatting) {
  EXPECT_EQ(format_metric_value(0), "0");
  EXPECT_EQ(format_metric_value(42), "42");
  EXPECT_EQ(format_metric_value(-3), "-3");
  EXPECT_EQ(format_metric_value(0.005), "0.005");
  EXPECT_EQ(format_metric_value(2.5), "2.5");
  EXPECT_EQ(format_metric_value(1e21), "1e+21");
  EXPECT_EQ(format_metric_value(9007199254740992.0), "9007199254740992");
  EXPECT_EQ(format_metric_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_metric_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_metric_value(std::nan("")), "NaN");
}

TEST(MetricsText, MisuseThrows) {
  MetricsText m;
  EXPECT_THROW(m.sample(1), std::logic_error);                 // no family
  EXPECT_THROW(m.counter("1bad", "x"), std::logic_error);      // name starts with a digit
  EXPECT_THROW(m.counter("bad-name", "x"), std::logic_error);  // '-' not allowed
  m.counter("ok_total", "x");
  EXPECT_THROW(m.gauge("ok_total", "x"), std::logic_error);           // type changed
  EXPECT_THROW(m.sample({{"bad:label", "v"}}, 1), std::logic_error);  // ':' only in metric names
  const std::array<double, 1> bounds{1};
  const std::array<std::uint64_t, 2> counts{0, 0};
  EXPECT_THROW(m.sample({}, HistogramSample{bounds, counts, 0}), std::logic_error);  // counter
  m.histogram("h", "x");
  EXPECT_THROW(m.sample(1), std::logic_error);  // plain sample on a histogram
  EXPECT_THROW(m.sample({}, HistogramSample{bounds, std::span(counts).first(1), 0}),
               std::logic_error);  // counts must be bounds + 1
  EXPECT_THROW(m.sample({{"le", "1"}}, HistogramSample{bounds, counts, 0}), std::logic_error);
}

}  // namespace
}  // namespace sluice::telemetry
