// The connection after a 101 (src/proxy/tunnel_session.cpp), over real loopback sockets: the HTTP
// session hands both streams to a TunnelSession and ends, giving back what its request held; the
// tunnel carries bytes both ways (those that came with the heads first), keeps its in-flight count
// on its server until it closes, is counted then, and closes at tunnel_idle_timeout (on the
// worker's clock, through the tick's expire()) or at the shutdown timeout (close()).
#include "session_harness.hpp"

namespace sluice::proxy {
namespace {

using namespace session_test;

class TunnelSessionTest : public SessionHarness {
protected:
  // An Upgrade through the session: the origin answers 101 and sends its first frame with it.
  Client& upgrade(const std::string& upstream_keys = "") {
    configure("", "", upstream_keys);
    origin_.response =
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nhello";
    auto& client = connect();
    client.send("GET /chat HTTP/1.1\r\nHost: app.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                "X-Request-Id: t-1\r\n\r\n");
    head_ = next_response(client);
    return client;
  }
  Endpoint& server() const { return *worker_.snapshot->upstreams.front()->endpoint(0); }
  std::string head_;
};

TEST_F(TunnelSessionTest, TheSessionEndsAndTheTunnelCarriesBytesBothWaysUntilBothClose) {
  auto& client = upgrade();
  EXPECT_EQ(head_.substr(0, head_.find("\r\n")), "HTTP/1.1 101 Switching Protocols");
  EXPECT_EQ(field_of(head_, "Upgrade"), "websocket");
  // The origin's first frame came with its 101: it reaches the client first.
  ASSERT_TRUE(run_until([&] { return client.unread() == "hello"; })) << client.unread();
  // The HTTP session ended; the tunnel is the worker's one session now. It holds the relay block
  // and no arena block: those of the request (its heads) are back in the pool already.
  EXPECT_EQ(ended_, 1);
  EXPECT_EQ(tunnels_started_, 1);
  EXPECT_EQ(worker_.sessions.size(), 1u);
  const auto arenas_free = worker_.arena_blocks.free_blocks();
  const auto relays_free = worker_.relay_blocks.free_blocks();
  EXPECT_EQ(server().in_flight(), 1);  // drains wait for it, max_conns counts it
  EXPECT_EQ(server().tunnels(), 1);

  client.send("ping");
  auto& origin = *origin_.connections.at(0);
  ASSERT_TRUE(run_until([&] { return origin.received.ends_with("\r\n\r\nping"); }));
  // The client half-closes, then the origin closes: the tunnel passes the first on and ends.
  error_code ignored;
  client.stream.shutdown(tcp::socket::shutdown_send, ignored);
  ASSERT_TRUE(run_until([&] { return origin.ended; }));
  EXPECT_EQ(origin.end, net::error::eof);
  origin.socket.close(ignored);
  ASSERT_TRUE(run_until([&] { return tunnels_ended_ == 1; }));
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  EXPECT_EQ(client.end, net::error::eof);
  EXPECT_EQ(server().in_flight(), 0);
  EXPECT_EQ(server().tunnels(), 0);
  EXPECT_TRUE(worker_.sessions.empty());
  EXPECT_EQ(worker_.arena_blocks.free_blocks(), arenas_free);
  EXPECT_EQ(worker_.relay_blocks.free_blocks(), relays_free + 1);
  const auto& c = server().counters(worker_.index);
  EXPECT_EQ(c.tunnels_closed[0].load(), 1u);  // closed by the peers
  EXPECT_EQ(c.responses[1].load(), 1u);       // the exchange, counted as the origin's 1xx
}

// A handoff that ends without a TunnelSession (the worker's loop ended first) still gives back
// what it holds: the relay block to its pool, the in-flight count on its server, both streams.
TEST_F(TunnelSessionTest, AHandoffNoTunnelTookGivesBackItsRelayBlockAndInFlightCount) {
  drop_tunnels_ = true;
  const auto relays_free = worker_.relay_blocks.free_blocks();
  auto& client = upgrade();
  EXPECT_EQ(head_.substr(0, head_.find("\r\n")), "HTTP/1.1 101 Switching Protocols");
  ASSERT_TRUE(run_until([&] { return ended_ == 1 && client.ended; }));
  EXPECT_EQ(tunnels_started_, 0);
  EXPECT_EQ(server().in_flight(), 0);
  EXPECT_TRUE(worker_.sessions.empty());
  EXPECT_EQ(worker_.relay_blocks.free_blocks(), relays_free + 1);
}

TEST_F(TunnelSessionTest, ASilentTunnelIsClosedAtTunnelIdleTimeout) {
  auto& client = upgrade("tunnel_idle_timeout = \"1s\"\n");
  ASSERT_TRUE(run_until([&] { return client.unread() == "hello"; }));
  const auto step = [&] {
    clock_.advance(std::chrono::milliseconds(250));
    tick();
    settle();
  };
  for (int i = 0; i < 3; ++i) step();  // 750 ms of silence: still open
  EXPECT_EQ(tunnels_ended_, 0);
  client.send("ping");  // a byte through it: the silence starts again
  auto& origin = *origin_.connections.at(0);
  ASSERT_TRUE(run_until([&] { return origin.received.ends_with("ping"); }));
  for (int i = 0; i < 3; ++i) step();
  EXPECT_EQ(tunnels_ended_, 0);
  step();  // a full second since the ping
  ASSERT_TRUE(run_until([&] { return tunnels_ended_ == 1 && client.ended; }));
  EXPECT_EQ(server().in_flight(), 0);
  EXPECT_EQ(server().counters(worker_.index).tunnels_closed[1].load(), 1u);  // idle
}

TEST_F(TunnelSessionTest, TheShutdownTimeoutClosesAnOpenTunnel) {
  auto& client = upgrade();
  ASSERT_TRUE(run_until([&] { return client.unread() == "hello"; }));
  ASSERT_EQ(worker_.sessions.size(), 1u);
  // What Worker::stop() does at shutdown_timeout.
  for (auto it = worker_.sessions.begin(); it != worker_.sessions.end();) (it++)->close();
  ASSERT_TRUE(run_until([&] { return tunnels_ended_ == 1 && client.ended; }));
  EXPECT_EQ(server().in_flight(), 0);
  EXPECT_EQ(server().tunnels(), 0);
  EXPECT_EQ(server().counters(worker_.index).tunnels_closed[0].load(), 1u);
}

}  // namespace
}  // namespace sluice::proxy
