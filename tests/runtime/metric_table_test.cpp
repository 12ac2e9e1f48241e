// The metric table: every family is declared once with a type, a HELP line and one reader, is
// documented for operators (docs/admin.md), and renders in table order; a family that is not
// shown has no line at all; the counters the data path keeps by enum come out under their labels.
#include "sluice/runtime/metric_table.hpp"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"
#include "sluice/runtime/control.hpp"
#include "sluice/runtime/snapshot.hpp"

#include "fake_process.hpp"

namespace sluice {
namespace {

constexpr std::string_view one_upstream = R"(
[server]
listen = ["127.0.0.1:0"]
[upstreams.app]
[[upstreams.app.servers]]
address = "127.0.0.1:9001"
name = "app-1"
)";

struct MetricTableTest : ::testing::Test {
  EndpointDirectory directory{steady_clock()};
  test::FakeProcess process;

  MetricTableTest() { process.upstream = 7; }

  void load(std::string_view text) {
    auto result = config::load_string(std::string(text), "test.toml");
    if (!result.ok()) throw std::runtime_error(result.errors.at(0).to_string());
    process.current =
        build_snapshot(std::make_shared<const config::Config>(std::move(*result.config)), directory, 1);
  }

  std::string render(ProcessFigures figures = {}) {
    return render_metrics({*process.current, process, 2, steady_clock().now(), figures});
  }

  Endpoint& server() { return *process.current->upstreams.at(0)->endpoints()[0]; }
};

// The families in the order of their `# TYPE` lines, as "name type".
std::vector<std::string> declared(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("# TYPE ", 0) == 0) out.push_back(line.substr(7));
  return out;
}

std::string_view type_name(telemetry::MetricType type) {
  switch (type) {
    case telemetry::MetricType::counter: return "counter";
    case telemetry::MetricType::gauge: return "gauge";
    case telemetry::MetricType::histogram: return "histogram";
  }
  return "";
}

TEST(MetricTable, EachFamilyOnceWithHelpAndOneReader) {
  std::set<std::string_view> names;
  for (const auto& f : metric_families()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name << " twice";
    EXPECT_TRUE(std::regex_match(std::string(f.name), std::regex("(sluice|process)_[a-z][a-z0-9_]*"))) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    const int readers = (f.value != nullptr) + (f.per_upstream != nullptr) + (f.per_server != nullptr) +
                        (f.samples != nullptr);
    EXPECT_EQ(readers, 1) << f.name;
    if (f.type == telemetry::MetricType::counter)
      EXPECT_TRUE(f.name.ends_with("_total")) << f.name << ": a counter's name ends in _total";
  }
}

TEST(MetricTable, EveryFamilyIsInTheOperatorsTableAndNoOther) {
  std::ifstream in(std::string(SLUICE_FUZZ_DIR) + "/../docs/admin.md");
  ASSERT_TRUE(in) << "docs/admin.md";
  std::set<std::string> documented;
  const std::regex row(R"(^\| `((?:sluice|process)_[a-z][a-z0-9_]*)` \| (counter|gauge|histogram) \|)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) documented.insert(m[1].str() + " " + m[2].str());
  }
  std::set<std::string> table;
  for (const auto& f : metric_families()) table.insert(std::string(f.name) + " " + std::string(type_name(f.type)));
  for (const auto& f : table) EXPECT_TRUE(documented.contains(f)) << f << ": not in docs/admin.md's table";
  for (const auto& d : documented) EXPECT_TRUE(table.contains(d)) << d << ": documented, not exposed";
}

TEST_F(MetricTableTest, FamiliesComeInTableOrderAndHiddenOnesHaveNoLine) {
  load(one_upstream);
  const auto text = render();
  std::vector<std::string> expected;
  for (const auto& f : metric_families()) {
    // Not shown here: no DNS names, no TLS (or ACME) or PROXY protocol listener, no route
    // admission, no fleet, and no process figures.
    if (f.name.starts_with("process_") || f.name.starts_with("sluice_dns_") || f.name.starts_with("sluice_fleet_") ||
        f.name.starts_with("sluice_discover") || f.name.starts_with("sluice_tls_") ||
        f.name.starts_with("sluice_acme_") ||
        f.name == "sluice_proxy_protocol_rejected_total" || f.name == "sluice_admission_denied_total" ||
        f.name == "sluice_rate_limited_total")
      continue;
    expected.push_back(std::string(f.name) + " " + std::string(type_name(f.type)));
  }
  EXPECT_EQ(declared(text), expected);
  EXPECT_NE(text.find("# HELP sluice_server_state 1 for the server's current state.\n"
                      "# TYPE sluice_server_state gauge\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("process_"), std::string::npos);
}

TEST_F(MetricTableTest, EachReaderShapeRendersItsLabels) {
  load(one_upstream);
  server().begin_request();
  ProcessFigures figures;
  figures.open_fds = 9;
  const auto text = render(figures);
  for (const auto* line : {
           R"(sluice_build_info{version=")",
           "\nsluice_upstream_in_flight{upstream=\"app\",server=\"app-1\"} 1\n",  // per_server
           "\nsluice_ejections_total{upstream=\"app\"} 0\n",                        // per_upstream
           "\nsluice_config_rollbacks_total 2\n",                                   // value
           "\nsluice_access_log_dropped_total 4\n",
           "\nsluice_connections{side=\"client\"} 12\n",                            // samples
           "\nsluice_connections{side=\"upstream\"} 7\n",
           "\nsluice_parked_connections 5\n",
           "\n# TYPE process_open_fds gauge\nprocess_open_fds 9\n",  // shown: it was read
       })
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
  EXPECT_EQ(text.find("process_max_fds"), std::string::npos) << "not read: not shown";
  server().end_request();
}

TEST_F(MetricTableTest, CountersKeptByEnumComeOutUnderTheirLabels) {
  load(one_upstream);
  auto& k = server().counters(1);
  EndpointCounters::bump(k.retry_skips[static_cast<std::size_t>(RetrySkip::budget_exhausted)]);
  EndpointCounters::bump(k.tunnels_closed[static_cast<std::size_t>(TunnelVerdict::idle)], 2);
  k.count_exchange(EndpointCounters::own_answer_slot(503), std::chrono::microseconds(1500));
  k.count_exchange(EndpointCounters::origin_answer_slot(404), std::chrono::microseconds(1500));
  k.count_exchange(EndpointCounters::client_cut_slot, std::chrono::microseconds(1500));
  const auto text = render();
  for (const auto* line : {
           R"(sluice_retries_skipped_total{upstream="app",reason="budget_exhausted"} 1)",
           R"(sluice_retries_skipped_total{upstream="app",reason="deadline"} 0)",
           R"(sluice_tunnels_closed_total{upstream="app",reason="idle"} 2)",
           R"(sluice_tunnels_closed_total{upstream="app",reason="closed"} 0)",
           R"(sluice_requests_total{upstream="app",server="app-1",code="5xx",source="sluice"} 1)",
           R"(sluice_requests_total{upstream="app",server="app-1",code="4xx",source="upstream"} 1)",
           R"(sluice_requests_total{upstream="app",server="app-1",code="cut",source="client"} 1)",
           R"(sluice_request_duration_seconds_bucket{upstream="app",server="app-1",le="0.0025"} 3)",
           R"(sluice_request_duration_seconds_count{upstream="app",server="app-1"} 3)",
       })
    EXPECT_NE(text.find(std::string("\n") + line + "\n"), std::string::npos) << line << " in\n" << text;
  EXPECT_EQ(text.find(R"(reason="none")"), std::string::npos) << "RetrySkip::none is not a skip";
  EXPECT_EQ(text.find(R"(sluice_request_duration_seconds_count{upstream="app",server=""})"), std::string::npos)
      << "an upstream's series without a server only once it observed an answer";
}

}  // namespace
}  // namespace sluice
