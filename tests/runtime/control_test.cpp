// RuntimeControl: the admin API's view of a running process, over a real snapshot and a process
// the test fakes. A drain reaches the named server only (and the process), the status and the
// metrics sum each server's per-worker counters over the running workers, and what the process
// reports appears under its own name.
#include "sluice/runtime/control.hpp"

#include <string>
#include <vector>

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"
#include "sluice/runtime/snapshot.hpp"

#include "fake_process.hpp"

namespace sluice {
namespace {

namespace json = boost::json;

constexpr std::string_view two_servers = R"(
[server]
listen = ["127.0.0.1:0"]
[[route]]
path_prefix = "/api/"
upstream = "api"
[[route]]
path_prefix = "/"
upstream = "app"
[upstreams.app]
[[upstreams.app.servers]]
address = "127.0.0.1:9001"
name = "app-1"
[[upstreams.app.servers]]
address = "127.0.0.1:9002"
name = "app-2"
[upstreams.api]
[[upstreams.api.servers]]
address = "127.0.0.1:9003"
name = "api-1"
)";

struct ControlTest : ::testing::Test {
  EndpointDirectory directory{steady_clock()};
  test::FakeProcess process;
  std::shared_ptr<const Snapshot>& snapshot = process.current;
  std::vector<std::string>& drained = process.drains;
  unsigned& workers = process.worker_count;
  std::unique_ptr<RuntimeControl> control;

  ControlTest() {
    auto result = config::load_string(std::string(two_servers), "test.toml");
    if (!result.ok()) throw std::runtime_error(result.errors.at(0).message);
    snapshot = build_snapshot(std::make_shared<const config::Config>(std::move(*result.config)), directory, 7);
    control = std::make_unique<RuntimeControl>(process);
  }

  Endpoint& server(std::size_t upstream, std::size_t index) {
    return *snapshot->upstreams[upstream]->endpoints()[index];
  }

  json::object status_of(const std::string& upstream, const std::string& identity) {
    const auto root = json::parse(control->status_json());
    for (const auto& u : root.at("upstreams").as_array())
      if (u.at("name").as_string() == upstream)
        for (const auto& s : u.at("servers").as_array())
          if (s.at("identity").as_string() == identity) return s.as_object();
    ADD_FAILURE() << "no server " << upstream << "/" << identity << " in " << control->status_json();
    return {};
  }

  bool has_line(const std::string& line) {
    const auto text = control->metrics_text();
    return text.find("\n" + line + "\n") != std::string::npos;
  }
};

TEST_F(ControlTest, ADrainReachesTheNamedServerOnlyAndTheProcess) {
  EXPECT_EQ(control->set_drain("app", "app-2", true), admin::DrainOutcome::done);
  EXPECT_FALSE(server(0, 0).draining());
  EXPECT_TRUE(server(0, 1).draining());
  EXPECT_TRUE(server(0, 1).drained_by_api());
  EXPECT_FALSE(server(1, 0).draining());
  EXPECT_EQ(drained, (std::vector<std::string>{"app app-2 on"}));

  const auto s = status_of("app", "app-2");
  EXPECT_TRUE(s.at("draining").as_bool());
  EXPECT_EQ(s.at("drain_source").as_string(), "api");
  EXPECT_TRUE(s.at("drained").as_bool()) << "nothing in flight: drained at once";
  EXPECT_TRUE(has_line(R"(sluice_server_state{upstream="app",server="app-2",state="draining"} 1)"));
  EXPECT_TRUE(has_line(R"(sluice_server_state{upstream="app",server="app-2",state="up"} 0)"));
  EXPECT_TRUE(has_line(R"(sluice_server_state{upstream="app",server="app-1",state="up"} 1)"));

  EXPECT_EQ(control->set_drain("app", "app-2", false), admin::DrainOutcome::done);
  EXPECT_FALSE(server(0, 1).draining());
  EXPECT_FALSE(server(0, 1).drained_by_api());
  EXPECT_EQ(drained, (std::vector<std::string>{"app app-2 on", "app app-2 off"}));
}

TEST_F(ControlTest, ADrainOfAnUnknownNameChangesNothing) {
  EXPECT_EQ(control->set_drain("nope", "app-1", true), admin::DrainOutcome::no_such_upstream);
  EXPECT_EQ(control->set_drain("api", "app-1", true), admin::DrainOutcome::no_such_server)
      << "a server is found within its own upstream only";
  EXPECT_FALSE(server(0, 0).draining());
  EXPECT_TRUE(drained.empty());
}

TEST_F(ControlTest, ADrainingServerIsDrainedOnlyWhenNothingIsInFlight) {
  Endpoint& ep = server(0, 0);
  ep.begin_request();
  ASSERT_EQ(control->set_drain("app", "app-1", true), admin::DrainOutcome::done);
  EXPECT_STREQ(shown_state(ep), "draining");
  EXPECT_FALSE(status_of("app", "app-1").at("drained").as_bool());
  ep.end_request();
  EXPECT_STREQ(shown_state(ep), "drained");
  EXPECT_TRUE(status_of("app", "app-1").at("drained").as_bool());
  EXPECT_STREQ(shown_state(server(0, 1)), "up");
}

TEST_F(ControlTest, RequestsAreSummedOverTheRunningWorkers) {
  Endpoint& ep = server(0, 0);
  ep.counters(0).count_exchange(2, std::chrono::microseconds(500));
  ep.counters(1).count_exchange(2, std::chrono::microseconds(500));
  ep.counters(1).count_exchange(5, std::chrono::microseconds(500));
  ep.counters(2).count_exchange(2, std::chrono::microseconds(500));  // no third worker runs
  EndpointCounters::bump(ep.counters(1).failures);

  const auto s = status_of("app", "app-1");
  EXPECT_EQ(s.at("requests").to_number<int>(), 3);
  EXPECT_EQ(s.at("failures").to_number<int>(), 1);
  EXPECT_EQ(status_of("app", "app-2").at("requests").to_number<int>(), 0);
  EXPECT_TRUE(has_line(R"(sluice_requests_total{upstream="app",server="app-1",code="2xx",source="upstream"} 2)"));
  EXPECT_TRUE(has_line(R"(sluice_requests_total{upstream="app",server="app-1",code="5xx",source="upstream"} 1)"));
  EXPECT_TRUE(has_line(R"(sluice_requests_total{upstream="app",server="app-2",code="2xx",source="upstream"} 0)"))
      << "2xx is always there, even at 0";
  EXPECT_EQ(control->metrics_text().find(R"(server="app-2",code="5xx")"), std::string::npos)
      << "other classes only once they happened";

  workers = 3;
  EXPECT_EQ(status_of("app", "app-1").at("requests").to_number<int>(), 4);
}

TEST_F(ControlTest, TheStatusNamesTheSnapshotAndItsServers) {
  const auto root = json::parse(control->status_json()).as_object();
  EXPECT_EQ(root.at("config_version").to_number<int>(), 7);
  EXPECT_EQ(root.at("config_file").as_string(), "test.toml");
  const auto& upstreams = root.at("upstreams").as_array();
  ASSERT_EQ(upstreams.size(), 2u);
  EXPECT_EQ(upstreams[0].at("name").as_string(), "app");
  EXPECT_EQ(upstreams[1].at("name").as_string(), "api");
  const auto s = status_of("app", "app-2");
  EXPECT_EQ(s.at("address").as_string(), "127.0.0.1:9002");
  EXPECT_EQ(s.at("origin").as_string(), "config");
  EXPECT_EQ(s.at("in_flight").to_number<int>(), 0);
}

TEST_F(ControlTest, WhatTheProcessReportsIsInTheMetrics) {
  EXPECT_TRUE(has_line(R"(sluice_config_reloads_total{result="success"} 3)"));
  EXPECT_TRUE(has_line(R"(sluice_config_reloads_total{result="failure"} 1)"));
  EXPECT_TRUE(has_line(R"(sluice_connections{side="client"} 12)"));
  EXPECT_TRUE(has_line("sluice_parked_connections 5"));
  EXPECT_EQ(control->metrics_text().find(R"(sluice_connections{side="upstream"})"), std::string::npos)
      << "not counted: no sample rather than a wrong 0";
  EXPECT_EQ(control->metrics_text().find("sluice_tls_handshakes_total"), std::string::npos)
      << "no TLS listener";
}

TEST_F(ControlTest, ReloadReadinessAndConfigGoThroughToTheRuntime) {
  const auto outcome = control->reload();
  EXPECT_TRUE(outcome.ok);
  EXPECT_EQ(outcome.version, 8u);
  EXPECT_TRUE(control->ready());
  EXPECT_EQ(control->config_source(), "test.toml");
  EXPECT_EQ(control->config_text(), two_servers);
}

}  // namespace
}  // namespace sluice
