// The CLI's blocking admin client against the real admin::Server (run on its own thread), and
// its failures: refused connection, timeout.
#include "sluice/admin/client.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/error.hpp>

#include "sluice/admin/server.hpp"

namespace sluice::admin {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

// Touched only on the server thread while it runs; read by the test after join().
class RecordingControl : public Control {
public:
  std::string status_json() override { return R"({"upstreams":[]})"; }
  std::string dashboard_json(const DashboardQuery&) override { return "{}"; }
  std::string metrics_text() override { return ""; }
  ReloadOutcome reload() override { return {true, {}, 3}; }
  DrainOutcome set_drain(const std::string& upstream, const std::string& server,
                         bool drain) override {
    drains.push_back(upstream + "/" + server + (drain ? " drain" : " undrain"));
    return DrainOutcome::done;
  }
  bool ready() override { return true; }
  std::string config_text() override { return "[server]\n"; }
  std::string config_source() override { return "running.toml"; }


  std::vector<std::string> drains;
};

// An admin server on a background thread, stopped and joined by the destructor.
class BackgroundServer {
public:
  explicit BackgroundServer(std::string token)
      : server_(io_, {"127.0.0.1", 0}, control_, std::move(token)) {
    server_.start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~BackgroundServer() { join(); }

  void join() {
    if (!thread_.joinable()) return;
    net::post(io_, [this] {
      server_.stop();
      guard_.reset();
    });
    thread_.join();
  }

  config::HostPort address() const { return {"127.0.0.1", server_.local_port()}; }
  RecordingControl& control() { return control_; }

private:
  net::io_context io_;
  net::executor_work_guard<net::io_context::executor_type> guard_{io_.get_executor()};
  RecordingControl control_;
  Server server_;
  std::thread thread_;
};

TEST(AdminClient, GetAndPostOnOneConnectionWithTheToken) {
  BackgroundServer server("tok");
  Client client(server.address(), "tok", 5s);
  auto status = client.get("/api/status");
  ASSERT_TRUE(status) << status.error().message();
  EXPECT_EQ(status->status, 200u);
  EXPECT_EQ(status->content_type, "application/json");
  EXPECT_EQ(status->body, R"({"upstreams":[]})");

  auto drain =
      client.post("/api/upstreams/app/servers/" + encode_path_segment("127.0.0.1:9001") + "/drain");
  ASSERT_TRUE(drain) << drain.error().message();
  EXPECT_EQ(drain->status, 200u);

  auto reload = client.post("/api/reload");
  ASSERT_TRUE(reload);
  EXPECT_EQ(reload->body, R"({"ok":true,"version":3,"watch_ms":0})");
  server.join();
  EXPECT_EQ(server.control().drains, std::vector<std::string>{"app/127.0.0.1:9001 drain"});
}

TEST(AdminClient, AWrongTokenIsAResponseNotAnError) {
  BackgroundServer server("tok");
  Client client(server.address(), "nope", 5s);
  auto reload = client.post("/api/reload");
  ASSERT_TRUE(reload) << reload.error().message();
  EXPECT_EQ(reload->status, 401u);
}

TEST(AdminClient, ReconnectsWhenTheKeptConnectionIsGone) {
  std::optional<BackgroundServer> server;
  server.emplace("");
  const auto address = server->address();
  Client client(address, "", 5s);
  ASSERT_TRUE(client.get("/healthz"));
  // A new server on the same port: the client's kept connection was closed by the old one.
  server.reset();
  net::io_context io;
  RecordingControl control;
  Server second(io, address, control, "");
  second.start();
  std::thread thread([&] { io.run_for(10s); });
  auto again = client.get("/healthz");
  net::post(io, [&] { second.stop(); });
  thread.join();
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_EQ(again->body, "ok");
}

TEST(AdminClient, RefusedConnectionIsAnError) {
  net::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  const auto port = acceptor.local_endpoint().port();
  acceptor.close();
  Client client({"127.0.0.1", port}, "", 5s);
  auto res = client.get("/api/status");
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error(), net::error::connection_refused);
}

TEST(AdminClient, ASilentServerTimesOut) {
  // Listening but never accepting: the kernel completes the handshake, nobody answers.
  net::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  Client client({"127.0.0.1", acceptor.local_endpoint().port()}, "", 200ms);
  auto res = client.get("/api/status");
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error(), boost::beast::error::timeout);
}

TEST(AdminClient, PathSegmentsArePercentEncoded) {
  EXPECT_EQ(encode_path_segment("app-1_x.y~z"), "app-1_x.y~z");
  EXPECT_EQ(encode_path_segment("127.0.0.1:9001"), "127.0.0.1%3A9001");
  EXPECT_EQ(encode_path_segment("a/b c%"), "a%2Fb%20c%25");
}

TEST(AdminStatus, FindsOneServer) {
  constexpr std::string_view status = R"({"upstreams":[
    {"name":"web","servers":[{"identity":"127.0.0.1:9001","in_flight":9,"draining":false}]},
    {"name":"app","servers":[{"identity":"app-1","in_flight":0,"draining":false},
                             {"identity":"127.0.0.1:9001","in_flight":2,"draining":true,"state":"up"}]}]})";
  const auto found = find_server_status(status, "app", "127.0.0.1:9001");
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->found);
  EXPECT_EQ(found->in_flight, 2u);
  EXPECT_TRUE(found->draining);
  EXPECT_FALSE(find_server_status(status, "app", "app-2")->found);
  EXPECT_FALSE(find_server_status(status, "api", "app-1")->found);
}

TEST(AdminStatus, InFleetModeTheFleetsCountIsTheOneWaitedOn) {
  constexpr std::string_view status = R"({"upstreams":[{"name":"app","servers":[
    {"identity":"app-1","in_flight":0,"draining":true,"fleet_in_flight":3,"fleet_unconfirmed":1}]}]})";
  const auto found = find_server_status(status, "app", "app-1");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->in_flight, 3u);
  EXPECT_EQ(found->unconfirmed, 1u);
  // Without the fleet's fields: this instance's own count, nobody to wait for.
  const auto alone = find_server_status(
      R"({"upstreams":[{"name":"app","servers":[{"identity":"app-1","in_flight":2,"draining":true}]}]})",
      "app", "app-1");
  ASSERT_TRUE(alone);
  EXPECT_EQ(alone->in_flight, 2u);
  EXPECT_EQ(alone->unconfirmed, 0u);
}

TEST(AdminStatus, RejectsOtherShapes) {
  std::string why;
  EXPECT_FALSE(find_server_status("not json", "app", "s", &why));
  EXPECT_NE(why.find("not JSON"), std::string::npos);
  EXPECT_FALSE(find_server_status(R"({"servers":[]})", "app", "s", &why));
  EXPECT_EQ(why, "status has no \"upstreams\" array");
  EXPECT_FALSE(find_server_status(
      R"({"upstreams":[{"name":"app","servers":[{"identity":"s","in_flight":"2"}]}]})", "app", "s",
      &why));
  EXPECT_EQ(why, "server entry lacks \"in_flight\" (a number) or \"draining\" (a boolean)");
}

TEST(AdminStatus, SummaryCountsServersThatTakeRequests) {
  const auto summary = status_summary(R"({"config_version": 3, "config_file": "/etc/sluice/sluice.toml",
    "upstreams": [{"name": "app", "balance": "round_robin", "queued": 0, "servers": [
      {"identity": "app-1", "address": "10.0.0.7:80", "draining": false, "in_flight": 2,
       "requests": 10, "failures": 0, "state": "up", "health_state": "up", "reason": "initial state up"},
      {"identity": "app-22", "address": "10.0.0.8:80", "draining": true, "drain_source": "api",
       "in_flight": 0, "requests": 4, "failures": 0, "state": "drained", "health_state": "up"},
      {"identity": "app-3", "address": "10.0.0.9:80", "draining": false, "in_flight": 0,
       "requests": 7, "failures": 3, "state": "ejected", "health_state": "ejected", "reason": "3 failures"}]},
     {"name": "static", "balance": "least_conn", "queued": 5, "servers": [
      {"identity": "s", "address": "10.0.1.1:80", "draining": false, "in_flight": 0,
       "requests": 0, "failures": 0}]}]})");
  ASSERT_TRUE(summary);
  EXPECT_EQ(*summary,
            "config version 3 (/etc/sluice/sluice.toml)\n"
            "upstream app (round_robin): 1/3 servers up\n"
            "  app-1   10.0.0.7:80  up: initial state up; in flight 2, requests 10, failures 0\n"
            "  app-22  10.0.0.8:80  drained (api), health up; in flight 0, requests 4, failures 0\n"
            "  app-3   10.0.0.9:80  ejected: 3 failures; in flight 0, requests 7, failures 3\n"
            "upstream static (least_conn): 1/1 servers up, 5 queued\n"
            "  s  10.0.1.1:80  up (no health checks); in flight 0, requests 0, failures 0\n");
  std::string why;
  EXPECT_FALSE(status_summary("{}", &why));
  EXPECT_EQ(why, "status has no \"upstreams\" array");
}

}  // namespace
}  // namespace sluice::admin
