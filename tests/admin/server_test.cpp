// The admin listener over real loopback sockets: every route, the bearer token, 404/405, percent-
// decoded identities, keep-alive and stop(). Server and client coroutines share one io_context run
// with run_for (bounded, no sleeps); a fake Control records every call it receives.
#include "sluice/admin/server.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>

namespace sluice::admin {
namespace {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using Calls = std::vector<std::string>;

constexpr auto nothrow = net::as_tuple(net::use_awaitable);

// Records every call; answers what the test sets up. Upstream "app" has servers
// "127.0.0.1:9001" and "app-1"; anything else is unknown.
class FakeControl : public Control {
public:
  std::string status_json() override {
    calls.push_back("status");
    return status;
  }
  std::string dashboard_json(const DashboardQuery& query) override {
    calls.push_back("dashboard " + std::to_string(query.after_tick) + " " +
                    std::to_string(query.after_event));
    return status;
  }
  std::string metrics_text() override {
    calls.push_back("metrics");
    return metrics;
  }
  std::string fleet_json() override {
    calls.push_back("fleet");
    return fleet;
  }
  ReloadOutcome reload() override {
    calls.push_back("reload");
    if (throw_on_reload) throw std::runtime_error("snapshot build failed");
    return reload_outcome;
  }
  ReloadOutcome reload_unwatched() override {
    calls.push_back("reload unwatched");
    return reload_outcome;
  }
  DrainOutcome set_drain(const std::string& upstream, const std::string& server,
                         bool drain) override {
    calls.push_back((drain ? "drain " : "undrain ") + upstream + " " + server);
    if (upstream != "app") return DrainOutcome::no_such_upstream;
    if (server != "127.0.0.1:9001" && server != "app-1") return DrainOutcome::no_such_server;
    return DrainOutcome::done;
  }
  bool ready() override {
    calls.push_back("ready");
    return is_ready;
  }
  std::string config_text() override {
    calls.push_back("config");
    return "[server]\nlisten = [\"127.0.0.1:8080\"]\n";
  }
  std::string config_source() override { return "conf/running.toml"; }

  Calls calls;
  std::string status = R"({"upstreams":[]})";
  std::string fleet;  // "": not in a fleet
  std::string metrics = "# HELP sluice_up Up.\n# TYPE sluice_up gauge\nsluice_up 1\n";
  ReloadOutcome reload_outcome{true, {}, 7};
  bool throw_on_reload = false;
  bool is_ready = true;
};

using Request = bhttp::request<bhttp::string_body>;
using Response = bhttp::response<bhttp::string_body>;

// What a well-behaved client sends: the listener's address as Host, and a POST declared as JSON.
Request make(bhttp::verb method, std::string target, std::string authorization = "") {
  Request req{method, target, 11};
  req.set(bhttp::field::host, "127.0.0.1:9901");
  if (method == bhttp::verb::post) req.set(bhttp::field::content_type, "application/json");
  if (!authorization.empty()) req.set(bhttp::field::authorization, authorization);
  req.prepare_payload();
  return req;
}

Request get(std::string target) { return make(bhttp::verb::get, std::move(target)); }
Request post(std::string target, std::string authorization = "") {
  return make(bhttp::verb::post, std::move(target), std::move(authorization));
}

class AdminServer : public ::testing::Test {
protected:
  void start(std::string token = "") {
    server_.emplace(io_, config::HostPort{"127.0.0.1", 0}, fake_, std::move(token));
    server_->start();
    ASSERT_NE(server_->local_port(), 0);
  }

  tcp::endpoint endpoint() const {
    return {net::ip::make_address("127.0.0.1"), server_->local_port()};
  }

  // Runs `client` on the server's io_context until it finishes (at most 10 s).
  void run(std::function<net::awaitable<void>()> client) {
    bool done = false;
    std::exception_ptr failure;
    net::co_spawn(io_, client(), [&](std::exception_ptr e) {
      done = true;
      failure = e;
      io_.stop();  // the listener would keep run_for busy until the limit
    });
    io_.restart();
    io_.run_for(10s);
    ASSERT_TRUE(done) << "client did not finish within 10 s";
    if (failure) std::rethrow_exception(failure);
  }

  // Sends `requests` one after the other on ONE connection and returns the responses.
  std::vector<Response> exchange(std::vector<Request> requests) {
    std::vector<Response> responses;
    run([&]() -> net::awaitable<void> {
      tcp::socket socket(io_);
      co_await socket.async_connect(endpoint(), net::use_awaitable);
      boost::beast::flat_buffer buffer;
      for (auto& req : requests) {
        co_await bhttp::async_write(socket, req, net::use_awaitable);
        bhttp::response_parser<bhttp::string_body> parser;
        parser.skip(req.method() == bhttp::verb::head);  // no body follows a HEAD response
        co_await bhttp::async_read(socket, buffer, parser, net::use_awaitable);
        responses.push_back(parser.release());
      }
    });
    return responses;
  }

  Response one(Request req) {
    auto responses = exchange({std::move(req)});
    return responses.empty() ? Response{} : std::move(responses.front());
  }

  net::io_context io_;
  FakeControl fake_;
  std::optional<Server> server_;  // last: stopped and destroyed before fake_
};

TEST_F(AdminServer, StatusIsTheControlsJson) {
  start();
  fake_.status = R"({"upstreams":[{"name":"app","servers":[]}]})";
  const auto res = one(get("/api/status"));
  EXPECT_EQ(res.result(), bhttp::status::ok);
  EXPECT_EQ(res[bhttp::field::content_type], "application/json");
  EXPECT_EQ(res[bhttp::field::cache_control], "no-store");
  EXPECT_EQ(res.body(), fake_.status);
  EXPECT_EQ(fake_.calls, Calls{"status"});
}

TEST_F(AdminServer, FleetIsTheControlsJsonOr404OutsideAFleet) {
  start();
  auto res = one(get("/api/fleet"));
  EXPECT_EQ(res.result(), bhttp::status::not_found);
  EXPECT_EQ(json::parse(res.body()), json::parse(R"({"error":"fleet mode is off: no [fleet] section"})"));
  fake_.fleet = R"({"name":"lb-1","redis_up":true})";
  res = one(get("/api/fleet"));
  EXPECT_EQ(res.result(), bhttp::status::ok);
  EXPECT_EQ(res[bhttp::field::content_type], "application/json");
  EXPECT_EQ(res.body(), fake_.fleet);
  EXPECT_EQ(fake_.calls, (Calls{"fleet", "fleet"}));
}

TEST_F(AdminServer, MetricsIsPrometheusText) {
  start();
  const auto res = one(get("/metrics"));
  EXPECT_EQ(res.result(), bhttp::status::ok);
  EXPECT_EQ(res[bhttp::field::content_type], "text/plain; version=0.0.4");
  EXPECT_EQ(res.body(), fake_.metrics);
  EXPECT_EQ(fake_.calls, Calls{"metrics"});
}

TEST_F(AdminServer, ConfigIsTheRunningTomlAndItsSource) {
  start();
  const auto res = one(get("/api/config"));
  EXPECT_EQ(res.result(), bhttp::status::ok);
  EXPECT_EQ(res[bhttp::field::content_type], "application/toml");
  EXPECT_EQ(res["Sluice-Config-Source"], "conf/running.toml");
  EXPECT_EQ(res.body(), "[server]\nlisten = [\"127.0.0.1:8080\"]\n");
  EXPECT_EQ(fake_.calls, Calls{"config"});
}

TEST_F(AdminServer, HealthzAnswersWithoutAskingTheRuntime) {
  start();
  const auto res = one(get("/healthz"));
  EXPECT_EQ(res.result(), bhttp::status::ok);
  EXPECT_EQ(res.body(), "ok");
  EXPECT_TRUE(fake_.calls.empty());
}

TEST_F(AdminServer, ReadyzFollowsControlReady) {
  start();
  auto res = one(get("/readyz"));
  EXPECT_EQ(res.result(), bhttp::status::ok);
  EXPECT_EQ(res.body(), "ready");
  fake_.is_ready = false;
  res = one(get("/readyz"));
  EXPECT_EQ(res.result(), bhttp::status::service_unavailable);
  EXPECT_EQ(res.body(), "not ready");
  EXPECT_EQ(fake_.calls, (Calls{"ready", "ready"}));
}

TEST_F(AdminServer, HeadGetsTheHeadersWithoutTheBody) {
  start();
  const auto res = one(make(bhttp::verb::head, "/healthz"));
  EXPECT_EQ(res.result(), bhttp::status::ok);
  EXPECT_EQ(res[bhttp::field::content_length], "2");
  EXPECT_EQ(res.body(), "");
}

TEST_F(AdminServer, DrainAndUndrainDecodeTheServerIdentity) {
  start();
  auto res = one(post("/api/upstreams/app/servers/127.0.0.1%3A9001/drain"));
  EXPECT_EQ(res.result(), bhttp::status::ok);
  EXPECT_EQ(res[bhttp::field::content_type], "application/json");
  EXPECT_EQ(json::parse(res.body()),
            json::parse(R"({"upstream":"app","server":"127.0.0.1:9001","draining":true})"));
  // ':' is a valid path character too: the identity may be sent unencoded.
  res = one(post("/api/upstreams/app/servers/127.0.0.1:9001/undrain"));
  EXPECT_EQ(res.result(), bhttp::status::ok);
  EXPECT_EQ(json::parse(res.body()),
            json::parse(R"({"upstream":"app","server":"127.0.0.1:9001","draining":false})"));
  res = one(post("/api/upstreams/%61pp/servers/app-1/drain?ignored=1"));
  EXPECT_EQ(res.result(), bhttp::status::ok);
  EXPECT_EQ(fake_.calls,
            (Calls{"drain app 127.0.0.1:9001", "undrain app 127.0.0.1:9001", "drain app app-1"}));
}

TEST_F(AdminServer, DrainOfAnUnknownUpstreamOrServerIs404) {
  start();
  auto res = one(post("/api/upstreams/nope/servers/app-1/drain"));
  EXPECT_EQ(res.result(), bhttp::status::not_found);
  EXPECT_EQ(json::parse(res.body()), json::parse(R"({"error":"no upstream 'nope'"})"));
  res = one(post("/api/upstreams/app/servers/10.0.0.1%3A80/undrain"));
  EXPECT_EQ(res.result(), bhttp::status::not_found);
  EXPECT_EQ(json::parse(res.body()),
            json::parse(R"({"error":"no server '10.0.0.1:80' in upstream 'app'"})"));
}

TEST_F(AdminServer, ReloadReportsTheVersionOrTheErrors) {
  start();
  auto res = one(post("/api/reload"));
  EXPECT_EQ(res.result(), bhttp::status::ok);
  EXPECT_EQ(json::parse(res.body()), json::parse(R"({"ok":true,"version":7,"watch_ms":0})"));
  fake_.reload_outcome.watch_ms = 30000;
  res = one(post("/api/reload?watch=0"));  // `sluice reload --no-watch`
  EXPECT_EQ(json::parse(res.body()), json::parse(R"({"ok":true,"version":7,"watch_ms":30000})"));

  fake_.reload_outcome = {false, {"a.toml:3:1: server.workrs: unknown key", "a.toml:9:5: x: y"}, 7};
  res = one(post("/api/reload"));
  EXPECT_EQ(res.result(), bhttp::status::unprocessable_entity);
  EXPECT_EQ(json::parse(res.body()),
            json::parse(R"({"ok":false,"errors":["a.toml:3:1: server.workrs: unknown key",)"
                        R"("a.toml:9:5: x: y"]})"));
  EXPECT_EQ(fake_.calls, (Calls{"reload", "reload unwatched", "reload"}));
}

TEST_F(AdminServer, AControlExceptionIs500AndTheListenerGoesOn) {
  start();
  fake_.throw_on_reload = true;
  const auto responses = exchange({post("/api/reload"), get("/healthz")});
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_EQ(responses[0].result(), bhttp::status::internal_server_error);
  EXPECT_EQ(json::parse(responses[0].body()), json::parse(R"({"error":"snapshot build failed"})"));
  EXPECT_EQ(responses[1].result(), bhttp::status::ok);
}

TEST_F(AdminServer, PostsWithoutTheRightTokenAre401AndChangeNothing) {
  start("s3cret");
  const std::vector<std::string> wrong{"",  // no Authorization at all
                                       "Bearer wrong",
                                       "Bearer s3cre",
                                       "Bearer s3cret2",
                                       "Basic czNjcmV0",
                                       "Bearers3cret",
                                       "s3cret"};
  for (const auto& authorization : wrong) {
    for (const auto* target : {"/api/reload", "/api/upstreams/app/servers/app-1/drain",
                               "/api/upstreams/app/servers/app-1/undrain"}) {
      const auto res = one(post(target, authorization));
      EXPECT_EQ(res.result(), bhttp::status::unauthorized)
          << target << " with '" << authorization << "'";
      EXPECT_EQ(res[bhttp::field::www_authenticate], "Bearer realm=\"sluice-admin\"");
    }
  }
  EXPECT_TRUE(fake_.calls.empty()) << ::testing::PrintToString(fake_.calls);
}

TEST_F(AdminServer, TheRightTokenIsAccepted) {
  start("s3cret");
  EXPECT_EQ(one(post("/api/reload", "Bearer s3cret")).result(), bhttp::status::ok);
  // RFC 9110 §11.1: the scheme is case-insensitive.
  EXPECT_EQ(one(post("/api/upstreams/app/servers/app-1/drain", "bearer s3cret")).result(),
            bhttp::status::ok);
  EXPECT_EQ(fake_.calls, (Calls{"reload", "drain app app-1"}));
}

TEST_F(AdminServer, ANewTokenTakesEffectForTheNextRequest) {
  start("old");
  EXPECT_EQ(one(post("/api/reload", "Bearer old")).result(), bhttp::status::ok);
  server_->set_token("new");
  EXPECT_EQ(one(post("/api/reload", "Bearer old")).result(), bhttp::status::unauthorized);
  EXPECT_EQ(one(post("/api/reload", "Bearer new")).result(), bhttp::status::ok);
  server_->set_token("");
  EXPECT_EQ(one(post("/api/reload")).result(), bhttp::status::ok);
  EXPECT_EQ(fake_.calls, (Calls{"reload", "reload", "reload"}));
}

TEST_F(AdminServer, GetsNeedNoToken) {
  start("s3cret");
  for (const auto* target : {"/api/status", "/metrics", "/healthz", "/readyz"}) {
    EXPECT_EQ(one(get(target)).result(), bhttp::status::ok) << target;
  }
}

TEST_F(AdminServer, UnknownPathsAre404) {
  start();
  for (const auto* target :
       {"/nope", "/api", "/api/status/", "/dashboard.html", "/api/upstreams/app/servers/x",
        "/api/upstreams/app/servers/x/explode", "/api/upstreams//servers/x/drain", "/METRICS"}) {
    const auto res = one(get(target));
    EXPECT_EQ(res.result(), bhttp::status::not_found) << target;
    EXPECT_EQ(res[bhttp::field::content_type], "application/json") << target;
  }
  EXPECT_TRUE(fake_.calls.empty());
}

Request with(Request req, bhttp::field field, std::string value) {
  req.set(field, value);
  return req;
}

TEST_F(AdminServer, AForeignHostIs421AndNothingIsCalled) {
  start();
  for (const auto* host : {"evil.example", "evil.example:9901", "sluice.internal", "localhost.evil"}) {
    auto res = one(with(get("/api/status"), bhttp::field::host, host));
    EXPECT_EQ(res.result(), bhttp::status::misdirected_request) << host;
    res = one(with(post("/api/reload"), bhttp::field::host, host));
    EXPECT_EQ(res.result(), bhttp::status::misdirected_request) << host;
  }
  EXPECT_TRUE(fake_.calls.empty());
}

TEST_F(AdminServer, LocalhostIpLiteralsAndAllowedHostsAreAccepted) {
  start();
  server_->set_allowed_hosts({"Sluice.Internal"});
  for (const auto* host : {"localhost", "LOCALHOST:9901", "127.0.0.1", "10.1.2.3:9901", "[::1]:9901",
                           "sluice.internal", "sluice.internal:80"}) {
    EXPECT_EQ(one(with(get("/healthz"), bhttp::field::host, host)).result(), bhttp::status::ok) << host;
  }
}

TEST_F(AdminServer, AnHttp11RequestWithoutHostIs400) {
  start();
  Request req = get("/healthz");
  req.erase(bhttp::field::host);
  EXPECT_EQ(one(req).result(), bhttp::status::bad_request);
}

TEST_F(AdminServer, ACrossSitePostIs403AndChangesNothing) {
  start();
  const auto drain = "/api/upstreams/app/servers/app-1/drain";
  auto res = one(with(post(drain), bhttp::field::origin, "http://evil.example"));
  EXPECT_EQ(res.result(), bhttp::status::forbidden);
  res = one(with(post(drain), bhttp::field::origin, "null"));
  EXPECT_EQ(res.result(), bhttp::status::forbidden);
  // Same site, another port: another origin.
  res = one(with(post(drain), bhttp::field::origin, "http://127.0.0.1:3000"));
  EXPECT_EQ(res.result(), bhttp::status::forbidden);
  Request fetched = post(drain);
  fetched.set("Sec-Fetch-Site", "cross-site");
  EXPECT_EQ(one(fetched).result(), bhttp::status::forbidden);
  fetched.set("Sec-Fetch-Site", "same-site");
  EXPECT_EQ(one(fetched).result(), bhttp::status::forbidden);
  EXPECT_TRUE(fake_.calls.empty());
}

TEST_F(AdminServer, ASameOriginPostFromThePageIsAccepted) {
  start();
  Request req = with(post("/api/reload"), bhttp::field::origin, "http://127.0.0.1:9901");
  req.set("Sec-Fetch-Site", "same-origin");
  EXPECT_EQ(one(req).result(), bhttp::status::ok);
  EXPECT_EQ(fake_.calls, (Calls{"reload"}));
}

TEST_F(AdminServer, WithoutATokenAPostMustBeDeclaredJson) {
  start();
  for (const auto* type : {"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"}) {
    Request req = post("/api/reload");
    if (*type == '\0') req.erase(bhttp::field::content_type); else req.set(bhttp::field::content_type, type);
    EXPECT_EQ(one(req).result(), bhttp::status::unsupported_media_type) << type;
  }
  EXPECT_TRUE(fake_.calls.empty());
  EXPECT_EQ(one(with(post("/api/reload"), bhttp::field::content_type, "Application/JSON; charset=utf-8"))
                .result(),
            bhttp::status::ok);
}

TEST_F(AdminServer, WithTheTokenNoContentTypeIsNeeded) {
  start("s3cret");
  Request req = post("/api/reload", "Bearer s3cret");
  req.erase(bhttp::field::content_type);
  EXPECT_EQ(one(req).result(), bhttp::status::ok);
  // The token does not excuse a cross-site origin.
  EXPECT_EQ(one(with(post("/api/reload", "Bearer s3cret"), bhttp::field::origin, "http://evil.example"))
                .result(),
            bhttp::status::forbidden);
}

TEST_F(AdminServer, ThePageAndItsAssetsAreServedWithAStrictPolicy) {
  start();
  for (const auto* target : {"/", "/dashboard"}) {
    const auto res = one(get(target));
    EXPECT_EQ(res.result(), bhttp::status::ok) << target;
    EXPECT_EQ(res[bhttp::field::content_type], "text/html; charset=utf-8");
    EXPECT_NE(res.body().find("<script src=\"/dashboard.js\""), std::string::npos);
    EXPECT_EQ(res.body().find("<script>"), std::string::npos);  // no inline script
    EXPECT_NE(std::string(res["Content-Security-Policy"]).find("script-src 'self'"), std::string::npos);
    EXPECT_NE(std::string(res["Content-Security-Policy"]).find("frame-ancestors 'none'"),
              std::string::npos);
  }
  EXPECT_EQ(one(get("/dashboard.js"))[bhttp::field::content_type], "text/javascript; charset=utf-8");
  EXPECT_EQ(one(get("/dashboard.css"))[bhttp::field::content_type], "text/css; charset=utf-8");
  EXPECT_EQ(one(get("/favicon.svg"))[bhttp::field::content_type], "image/svg+xml");
  EXPECT_TRUE(fake_.calls.empty());
}

TEST_F(AdminServer, DashboardPassesWhatThePageHas) {
  start();
  EXPECT_EQ(one(get("/api/dashboard?tick=41&event=7")).result(), bhttp::status::ok);
  EXPECT_EQ(one(get("/api/dashboard")).result(), bhttp::status::ok);
  EXPECT_EQ(one(get("/api/dashboard?tick=x&event=-1")).result(), bhttp::status::ok);
  EXPECT_EQ(fake_.calls, (Calls{"dashboard 41 7", "dashboard 0 0", "dashboard 0 0"}));
}

TEST_F(AdminServer, IdleConnectionsMakeWayForANewOne) {
  start();
  std::optional<Response> health;
  run([&]() -> net::awaitable<void> {
    // 100 connections that send nothing, more than the per-client and the global cap.
    std::vector<tcp::socket> idle;
    for (int i = 0; i < 100; ++i) {
      idle.emplace_back(io_);
      co_await idle.back().async_connect(endpoint(), net::use_awaitable);
    }
    tcp::socket socket(io_);
    co_await socket.async_connect(endpoint(), net::use_awaitable);
    auto req = get("/healthz");
    co_await bhttp::async_write(socket, req, net::use_awaitable);
    boost::beast::flat_buffer buffer;
    Response res;
    co_await bhttp::async_read(socket, buffer, res, net::use_awaitable);
    health = std::move(res);
  });
  ASSERT_TRUE(health);
  EXPECT_EQ(health->result(), bhttp::status::ok);
}

TEST_F(AdminServer, WrongMethodsAre405WithAllow) {
  start();
  auto res = one(post("/api/status"));
  EXPECT_EQ(res.result(), bhttp::status::method_not_allowed);
  EXPECT_EQ(res[bhttp::field::allow], "GET, HEAD");
  res = one(get("/api/reload"));
  EXPECT_EQ(res.result(), bhttp::status::method_not_allowed);
  EXPECT_EQ(res[bhttp::field::allow], "POST");
  res = one(make(bhttp::verb::delete_, "/api/upstreams/app/servers/app-1/drain"));
  EXPECT_EQ(res.result(), bhttp::status::method_not_allowed);
  EXPECT_EQ(res[bhttp::field::allow], "POST");
  res = one(make(bhttp::verb::put, "/metrics"));
  EXPECT_EQ(res.result(), bhttp::status::method_not_allowed);
  EXPECT_TRUE(fake_.calls.empty());
}

TEST_F(AdminServer, SeveralRequestsOnOneKeepAliveConnection) {
  start("t");
  const auto responses = exchange({get("/healthz"), get("/api/status"),
                                   post("/api/upstreams/app/servers/app-1/drain", "Bearer t"),
                                   post("/api/reload"),  // 401 keeps the connection too
                                   get("/nope"), get("/readyz")});
  ASSERT_EQ(responses.size(), 6u);
  const std::vector<unsigned> expected{200, 200, 200, 401, 404, 200};
  for (std::size_t i = 0; i < responses.size(); ++i) {
    EXPECT_EQ(responses[i].result_int(), expected[i]) << i;
    EXPECT_TRUE(responses[i].keep_alive()) << i;
  }
  EXPECT_EQ(fake_.calls, (Calls{"status", "drain app app-1", "ready"}));
}

TEST_F(AdminServer, ConnectionCloseIsHonoured) {
  start();
  run([&]() -> net::awaitable<void> {
    tcp::socket socket(io_);
    co_await socket.async_connect(endpoint(), net::use_awaitable);
    auto req = get("/healthz");
    req.keep_alive(false);
    co_await bhttp::async_write(socket, req, net::use_awaitable);
    boost::beast::flat_buffer buffer;
    Response res;
    co_await bhttp::async_read(socket, buffer, res, net::use_awaitable);
    EXPECT_FALSE(res.keep_alive());
    char byte = 0;
    auto [ec, n] = co_await socket.async_read_some(net::buffer(&byte, 1), nothrow);
    EXPECT_EQ(ec, net::error::eof);
  });
}

TEST_F(AdminServer, MalformedRequestIs400AndCloses) {
  start();
  run([&]() -> net::awaitable<void> {
    tcp::socket socket(io_);
    co_await socket.async_connect(endpoint(), net::use_awaitable);
    co_await net::async_write(socket,
                              net::buffer(std::string_view("GET / HTTP/1.1\r\nBad Header\r\n\r\n")),
                              net::use_awaitable);
    boost::beast::flat_buffer buffer;
    Response res;
    co_await bhttp::async_read(socket, buffer, res, net::use_awaitable);
    EXPECT_EQ(res.result(), bhttp::status::bad_request);
    EXPECT_FALSE(res.keep_alive());
  });
  EXPECT_TRUE(fake_.calls.empty());
}

TEST_F(AdminServer, StopClosesTheListenerAndOpenConnections) {
  start();
  const auto ep = endpoint();
  run([&]() -> net::awaitable<void> {
    tcp::socket socket(io_);
    co_await socket.async_connect(ep, net::use_awaitable);
    auto req = get("/healthz");
    co_await bhttp::async_write(socket, req, net::use_awaitable);
    boost::beast::flat_buffer buffer;
    Response res;
    co_await bhttp::async_read(socket, buffer, res, net::use_awaitable);
    EXPECT_TRUE(res.keep_alive());

    server_->stop();
    char byte = 0;
    auto [read_ec, n] = co_await socket.async_read_some(net::buffer(&byte, 1), nothrow);
    EXPECT_TRUE(read_ec == net::error::eof || read_ec == net::error::connection_reset)
        << read_ec.message();

    tcp::socket again(io_);
    auto [connect_ec] = co_await again.async_connect(ep, nothrow);
    EXPECT_EQ(connect_ec, net::error::connection_refused);
  });
  server_->stop();  // idempotent
}

TEST_F(AdminServer, StartFailsClearlyWhenTheAddressIsTaken) {
  tcp::acceptor taken(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  Server server(io_, {"127.0.0.1", taken.local_endpoint().port()}, fake_, "");
  try {
    server.start();
    FAIL() << "start() bound a port that is in use";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen on admin address 127.0.0.1:"),
              std::string::npos)
        << e.what();
  }
}

TEST(AdminSecret, EqualsComparesWholeValues) {
  EXPECT_TRUE(secret_equals("s3cret", "s3cret"));
  EXPECT_FALSE(secret_equals("s3cre", "s3cret"));
  EXPECT_FALSE(secret_equals("s3cret!", "s3cret"));
  EXPECT_FALSE(secret_equals("S3cret", "s3cret"));
  EXPECT_FALSE(secret_equals("", "s3cret"));
  EXPECT_FALSE(secret_equals(std::string_view("s3cret\0", 7), "s3cret"));
}

class TokenFile : public ::testing::Test {
protected:
  std::string write(const std::string& content) {
    std::ofstream(path_, std::ios::binary) << content;
    return path_;
  }
  void TearDown() override { std::remove(path_.c_str()); }

  std::string path_ = ::testing::TempDir() + "sluice_admin_token_" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name();
};

TEST_F(TokenFile, SurroundingWhitespaceIsTrimmed) {
  EXPECT_EQ(read_token_file(write("  s3cret-token\r\n\n")), "s3cret-token");
  EXPECT_EQ(read_token_file(write("abc")), "abc");
}

TEST_F(TokenFile, ProblemsAreClearErrors) {
  const auto message = [](const std::string& path) {
    try {
      read_token_file(path);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("/nonexistent/admin.token"),
            "cannot read admin token file '/nonexistent/admin.token': No such file or directory");
  const auto empty = write(" \n\t\n");
  EXPECT_EQ(message(empty), "admin token file '" + empty + "' is empty");
  const auto two_lines = write("abc\ndef\n");
  EXPECT_EQ(message(two_lines), "admin token file '" + two_lines +
                                    "' contains control characters (the token must be one line)");
}

}  // namespace
}  // namespace sluice::admin
