#include "sluice/health/prober.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

namespace sluice::health {
namespace {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

constexpr auto nothrow = net::as_tuple(net::use_awaitable);

// A tiny origin on the test's io_context: answers every request with a canned response and
// records what it saw. Real loopback sockets, so the prober sees real connects, EOFs and resets.
class Origin {
public:
  explicit Origin(net::io_context& io)
      : io_(io), acceptor_(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    net::co_spawn(io_, accept_loop(), net::detached);
  }

  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  tcp::endpoint address() const { return acceptor_.local_endpoint(); }

  // What to answer.
  unsigned status = 200;
  std::string body = "ok";
  std::string extra_headers;         // "Connection: close\r\n", ...
  std::optional<std::string> raw;    // sent as is instead of a response
  bool silent = false;               // read requests, never answer
  bool close_after_answer = false;   // close the connection after each answer, without saying so

  // What it saw.
  int accepts = 0;
  int requests = 0;
  std::vector<std::string> hosts, methods, targets, user_agents;

private:
  net::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(nothrow);
      if (ec) co_return;
      ++accepts;
      net::co_spawn(io_, serve(std::move(socket)), net::detached);
    }
  }

  net::awaitable<void> serve(tcp::socket socket) {
    boost::beast::flat_buffer buffer;
    for (;;) {
      bhttp::request<bhttp::string_body> request;
      auto [ec, n] = co_await bhttp::async_read(socket, buffer, request, nothrow);
      if (ec) co_return;
      ++requests;
      hosts.emplace_back(request[bhttp::field::host]);
      methods.emplace_back(request.method_string());
      targets.emplace_back(request.target());
      user_agents.emplace_back(request[bhttp::field::user_agent]);
      if (silent) continue;
      std::string text = raw ? *raw : response(request.method() == bhttp::verb::head);
      auto [wec, written] = co_await net::async_write(socket, net::buffer(text), nothrow);
      if (wec || close_after_answer) co_return;  // the socket closes with this frame
    }
  }

  std::string response(bool head) const {
    std::string r = "HTTP/1.1 " + std::to_string(status) + " Whatever\r\n";
    r += "Content-Length: " + std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n";
    if (!head) r += body;
    return r;
  }

  net::io_context& io_;
  tcp::acceptor acceptor_;
};

// Runs the loop until `done` or the limit; false on timeout. Never sleeps.
bool run_until(net::io_context& io, const std::function<bool()>& done,
               std::chrono::milliseconds limit = 3s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (io.stopped()) io.restart();
    if (io.run_one_until(end) == 0) return done();  // out of time or out of work
  }
  return true;
}

// Runs the loop for a while (to check that something does NOT happen).
void run_for(net::io_context& io, std::chrono::milliseconds d) {
  io.restart();
  io.run_for(d);
}

class HealthProberTest : public ::testing::Test {
protected:
  HealthProberTest() {
    prober.on_probe = [this](const ProbeTarget& t, const ProbeResult& r) {
      EXPECT_EQ(t.upstream, "app");
      probes.push_back(r);
    };
    prober.on_transition = [this](const ProbeTarget&, const Transition& t) {
      transitions.push_back(t);
      probes_at_transition.push_back(probes.size());
    };
  }

  static config::HealthCheckConfig fast(std::uint32_t rise = 2, std::uint32_t fall = 3) {
    config::HealthCheckConfig c;
    c.interval = 50ms;
    // Longer than the interval (config validation would refuse it; the prober copes by skipping
    // overrun slots) so that a loaded machine (sanitizers, valgrind) does not fail probes that
    // should pass. Tests about timeouts set their own.
    c.timeout = 1s;
    c.jitter = 0;
    c.rise = rise;
    c.fall = fall;
    return c;
  }

  // A server on `address` with a health object for `config`.
  struct Server {
    std::shared_ptr<Endpoint> endpoint;
    std::unique_ptr<ServerHealth> health;
  };
  Server server(const tcp::endpoint& address, const config::HealthCheckConfig& c) {
    auto e = std::make_shared<Endpoint>(
        "s1", config::HostPort{"127.0.0.1", address.port()}, address, 1);
    HealthPolicy policy;
    policy.active = ActivePolicy{c.rise, c.fall, c.initial_state == config::InitialState::up};
    return {e, std::make_unique<ServerHealth>(*e, policy, nullptr, steady_clock())};
  }
  static std::vector<ProbeTarget> targets(const Server& s) {
    return {ProbeTarget{s.endpoint, s.health.get(), "app"}};
  }

  bool run_until_probes(std::size_t n, std::chrono::milliseconds limit = 3s) {
    return run_until(io, [&] { return probes.size() >= n; }, limit);
  }

  net::io_context io;
  Origin origin{io};
  std::vector<ProbeResult> probes;
  std::vector<Transition> transitions;
  std::vector<std::size_t> probes_at_transition;  // probes seen when each transition came
  // Declared after the origin: stopped before the origin and the loop go away.
  Prober prober{io, steady_clock(), 42};
};

TEST_F(HealthProberTest, PassingOriginStaysUpOnOneKeepAliveConnection) {
  const auto c = fast();
  auto s = server(origin.address(), c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until_probes(5));
  for (const auto& p : probes) {
    EXPECT_TRUE(p.passed) << p.detail;
    EXPECT_GT(p.latency, 0ns);
  }
  EXPECT_TRUE(transitions.empty());
  EXPECT_EQ(s.endpoint->state(), ServerState::up);
  EXPECT_EQ(origin.accepts, 1);
  EXPECT_EQ(origin.requests, 5);
  EXPECT_EQ(origin.methods.front(), "GET");
  EXPECT_EQ(origin.targets.front(), "/health");
  EXPECT_EQ(origin.user_agents.front(), "sluice-health");
  // Default Host: the server's address as configured.
  EXPECT_EQ(origin.hosts.front(), "127.0.0.1:" + std::to_string(origin.port()));
}

TEST_F(HealthProberTest, FailingStatusTakesTheServerDownAfterFallProbes) {
  origin.status = 503;
  const auto c = fast(2, 3);
  auto s = server(origin.address(), c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until(io, [&] { return !transitions.empty(); }));
  EXPECT_EQ(probes_at_transition.front(), 3u);
  EXPECT_FALSE(probes.front().passed);
  EXPECT_EQ(probes.front().detail, "status 503 not in 200-399");
  EXPECT_EQ(transitions.front().event, HealthEvent::went_down);
  EXPECT_EQ(transitions.front().to, ServerState::down);
  EXPECT_NE(transitions.front().reason.find("status 503 not in 200-399"), std::string::npos)
      << transitions.front().reason;
  EXPECT_EQ(s.endpoint->state(), ServerState::down);
  // A 503 with Content-Length is a complete response: the connection is still reused.
  EXPECT_EQ(origin.accepts, 1);
}

TEST_F(HealthProberTest, RefusedConnectionTakesTheServerDown) {
  tcp::endpoint closed;
  {
    tcp::acceptor a(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    closed = a.local_endpoint();
  }  // nothing listens there any more
  const auto c = fast(2, 2);
  auto s = server(closed, c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until(io, [&] { return !transitions.empty(); }));
  EXPECT_EQ(probes.front().detail, "connect refused");
  EXPECT_EQ(transitions.front().event, HealthEvent::went_down);
  EXPECT_NE(transitions.front().reason.find("connect refused"), std::string::npos);
}

TEST_F(HealthProberTest, SilentOriginTimesOutAtTheTimeout) {
  // On a manual clock, so that the bound is exact and not about how fast this machine runs the
  // loop: one nanosecond before [health].timeout the probe is still waiting, however long the
  // loop runs; at the timeout it fails with "timeout", its latency the timeout itself.
  origin.silent = true;
  auto c = fast(2, 1);
  c.timeout = 30ms;
  ManualClock clock;
  Prober manual{io, clock, 42};
  manual.on_probe = prober.on_probe;
  manual.on_transition = prober.on_transition;
  auto s = server(origin.address(), c);
  manual.set_upstream("app", c, targets(s));
  clock.advance(c.interval);  // the first probe is due within one interval
  ASSERT_TRUE(run_until(io, [&] { return origin.requests == 1; }));
  clock.advance(c.timeout - 1ns);
  run_for(io, 3 * c.timeout);  // the deadline's timer fires and finds the clock short of it
  EXPECT_TRUE(probes.empty()) << probes.front().detail;
  EXPECT_EQ(s.endpoint->state(), ServerState::up);
  clock.advance(1ns);
  ASSERT_TRUE(run_until(io, [&] { return !transitions.empty(); }));
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_EQ(probes.front().detail, "timeout");
  EXPECT_EQ(probes.front().latency, c.timeout);
  EXPECT_EQ(transitions.front().event, HealthEvent::went_down);
  EXPECT_EQ(s.endpoint->state(), ServerState::down);
  // The timed-out connection is not reused: the next probe reconnects.
  clock.advance(c.interval);
  ASSERT_TRUE(run_until(io, [&] { return origin.requests == 2; }));
  EXPECT_EQ(origin.accepts, 2);
  EXPECT_EQ(probes.size(), 1u);  // the second probe waits for its own timeout
}

TEST_F(HealthProberTest, ExpectBodyMustBeContained) {
  origin.body = "status: degraded";
  auto c = fast(2, 1);
  c.expect_body = "ok";
  auto s = server(origin.address(), c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until_probes(1));
  EXPECT_FALSE(probes.front().passed);
  EXPECT_EQ(probes.front().detail, "body does not contain 'ok'");
  origin.body = "status: ok, all good";
  ASSERT_TRUE(run_until_probes(3));
  EXPECT_TRUE(probes.back().passed) << probes.back().detail;
}

TEST_F(HealthProberTest, RecoversAfterRisePasses) {
  origin.status = 500;
  const auto c = fast(3, 2);
  auto s = server(origin.address(), c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until(io, [&] { return transitions.size() == 1; }));
  ASSERT_EQ(s.endpoint->state(), ServerState::down);
  origin.status = 204;
  origin.body.clear();
  const auto failures = probes.size();
  ASSERT_TRUE(run_until(io, [&] { return transitions.size() == 2; }));
  EXPECT_EQ(transitions.back().event, HealthEvent::came_up);
  EXPECT_EQ(transitions.back().to, ServerState::up);
  // Probes after the switch: `rise` passes (one in flight at the switch may still have failed).
  const auto after = probes_at_transition.back() - failures;
  EXPECT_TRUE(after == 3 || after == 4) << after;
  EXPECT_TRUE(probes.back().passed);
  EXPECT_EQ(origin.accepts, 1);
}

TEST_F(HealthProberTest, HeadProbeExpectsNoBodyAndKeepsTheConnection) {
  origin.body = "a body the HEAD answer announces but does not send";
  auto c = fast();
  c.method = config::ProbeMethod::head;
  c.path = "/ping?deep=1";
  auto s = server(origin.address(), c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until_probes(3));
  for (const auto& p : probes) EXPECT_TRUE(p.passed) << p.detail;
  EXPECT_EQ(origin.methods.front(), "HEAD");
  EXPECT_EQ(origin.targets.front(), "/ping?deep=1");
  EXPECT_EQ(origin.accepts, 1);
}

TEST_F(HealthProberTest, CustomHostHeaderAndPort) {
  auto c = fast();
  c.host = "health.internal";
  c.port = origin.port();
  // The server's own address has no listener: probes must go to [health].port.
  tcp::endpoint closed;
  {
    tcp::acceptor a(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    closed = a.local_endpoint();
  }
  auto s = server(closed, c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until_probes(2));
  EXPECT_TRUE(probes.front().passed) << probes.front().detail;
  ASSERT_FALSE(origin.hosts.empty());
  EXPECT_EQ(origin.hosts.front(), "health.internal");
}

TEST_F(HealthProberTest, IdleConnectionClosedByTheOriginIsReplacedWithinTheProbe) {
  // The origin closes after each answer without saying so: every next probe finds a dead kept
  // connection, reconnects once and passes. No probe fails.
  origin.close_after_answer = true;
  const auto c = fast(2, 1);
  auto s = server(origin.address(), c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until_probes(4));
  for (const auto& p : probes) EXPECT_TRUE(p.passed) << p.detail;
  EXPECT_TRUE(transitions.empty());
  EXPECT_EQ(origin.accepts, 4);
}

TEST_F(HealthProberTest, ConnectionCloseIsHonoured) {
  origin.extra_headers = "Connection: close\r\n";
  const auto c = fast();
  auto s = server(origin.address(), c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until_probes(3));
  for (const auto& p : probes) EXPECT_TRUE(p.passed) << p.detail;
  EXPECT_EQ(origin.accepts, 3);
}

TEST_F(HealthProberTest, GarbageIsABadResponse) {
  origin.raw = "SSH-2.0-OpenSSH_9.6\r\n\r\n";
  const auto c = fast(2, 1);
  auto s = server(origin.address(), c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until_probes(1));
  EXPECT_EQ(probes.front().detail, "bad response");
}

TEST_F(HealthProberTest, ReloadKeepsTheConnectionAndRemovalStopsProbing) {
  const auto c = fast();
  auto s = server(origin.address(), c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until_probes(2));

  // Reload: same endpoint object, new path; the schedule and the connection carry over.
  auto reloaded = c;
  reloaded.path = "/v2/health";
  prober.set_upstream("app", reloaded, targets(s));
  EXPECT_EQ(prober.server_count(), 1u);
  ASSERT_TRUE(run_until_probes(4));
  EXPECT_EQ(origin.targets.back(), "/v2/health");
  EXPECT_EQ(origin.accepts, 1);

  prober.remove_upstream("app");
  EXPECT_EQ(prober.server_count(), 0u);
  const auto requests = origin.requests;
  const auto seen = probes.size();
  run_for(io, 5 * c.interval);
  EXPECT_EQ(origin.requests, requests);
  EXPECT_EQ(origin.accepts, 1);
  EXPECT_EQ(probes.size(), seen);
}

TEST_F(HealthProberTest, ReloadWithANewPortDropsTheConnection) {
  const auto c = fast();
  auto s = server(origin.address(), c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until_probes(2));
  auto reloaded = c;
  reloaded.port = origin.port();  // same listener, but the probe address is now configured apart
  prober.set_upstream("app", reloaded, targets(s));
  ASSERT_TRUE(run_until_probes(4));
  for (const auto& p : probes) EXPECT_TRUE(p.passed) << p.detail;
  EXPECT_EQ(origin.accepts, 2);
}

TEST_F(HealthProberTest, InterimResponsesAreSkipped) {
  origin.raw =
      "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  const auto c = fast();
  auto s = server(origin.address(), c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until_probes(3));
  for (const auto& p : probes) EXPECT_TRUE(p.passed) << p.detail;
  EXPECT_EQ(origin.accepts, 1);
}

TEST_F(HealthProberTest, OnlyTheFirst64KiBOfTheBodyAreRead) {
  auto c = fast(2, 1);
  c.expect_body = "ok";
  origin.body = "ok" + std::string(100 * 1024, 'x');
  auto s = server(origin.address(), c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until_probes(2));
  for (const auto& p : probes) EXPECT_TRUE(p.passed) << p.detail;
  // The rest of the body was not read, so the connection could not serve another probe.
  EXPECT_EQ(origin.accepts, 2);

  origin.body = std::string(100 * 1024, 'x') + "ok";
  const auto before = probes.size();
  ASSERT_TRUE(run_until_probes(before + 1));
  EXPECT_EQ(probes.back().detail, "body does not contain 'ok'");
}

TEST_F(HealthProberTest, ReloadWithoutAServerStopsOnlyThatServer) {
  Origin other(io);
  const auto c = fast();
  auto a = server(origin.address(), c);
  auto b = server(other.address(), c);
  prober.set_upstream("app", c, {ProbeTarget{a.endpoint, a.health.get(), "app"},
                                 ProbeTarget{b.endpoint, b.health.get(), "app"}});
  ASSERT_TRUE(run_until(io, [&] { return origin.requests >= 2 && other.requests >= 2; }));
  prober.set_upstream("app", c, targets(a));
  EXPECT_EQ(prober.server_count(), 1u);
  const auto other_requests = other.requests;
  const auto kept_requests = origin.requests;
  run_for(io, 4 * c.interval);
  EXPECT_EQ(other.requests, other_requests);
  EXPECT_GT(origin.requests, kept_requests);
  EXPECT_EQ(origin.accepts, 1);
}

TEST_F(HealthProberTest, StopDuringAProbeReportsNothing) {
  origin.silent = true;
  auto c = fast();
  c.timeout = 40ms;
  auto s = server(origin.address(), c);
  prober.set_upstream("app", c, targets(s));
  ASSERT_TRUE(run_until(io, [&] { return origin.requests == 1; }));  // a probe is in flight
  prober.stop();
  run_for(io, 3 * c.interval);
  EXPECT_TRUE(probes.empty());
  EXPECT_EQ(origin.accepts, 1);
}

TEST_F(HealthProberTest, FirstProbeComesWithinOneInterval) {
  // On a manual clock, so that the assertion is about the prober's schedule and not about how
  // fast this machine runs the loop: the clock is moved to the last instant of the first
  // interval before the loop runs at all, and the first probe must then be due, whatever the
  // random first slot (one seed per run of the loop).
  auto c = fast();
  c.interval = 200ms;
  c.timeout = 100ms;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    ManualClock clock;
    std::vector<Clock::time_point> probed_at;  // on the manual clock
    auto s = server(origin.address(), c);
    Prober manual{io, clock, seed};
    manual.on_probe = [&](const ProbeTarget&, const ProbeResult&) { probed_at.push_back(clock.now()); };
    manual.set_upstream("app", c, targets(s));
    clock.advance(c.interval - 1ns);
    ASSERT_TRUE(run_until(io, [&] { return !probed_at.empty(); })) << "seed " << seed;
    manual.stop();
  }
}

}  // namespace
}  // namespace sluice::health
