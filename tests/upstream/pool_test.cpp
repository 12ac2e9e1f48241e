#include "sluice/upstream/pool.hpp"

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/write.hpp>
#include <array>
#include <optional>
#include <string_view>
#include <thread>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "sluice/endpoint/endpoint.hpp"

namespace sluice {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// A real loopback listener, so the pool sees real sockets and a real EOF.
struct Fixture : ::testing::Test {
  net::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)};
  ManualClock clock;
  ConnectionPool pool{clock};
  // Outstanding work, as a worker always has: without it poll() would not run the reactor.
  net::executor_work_guard<net::io_context::executor_type> guard = net::make_work_guard(io);
  Endpoint endpoint{"o", config::HostPort{"127.0.0.1", acceptor.local_endpoint().port()},
                    acceptor.local_endpoint(), 1};

  // Returns the client side; the server side goes to *server.
  ConnectionPool::stream_type connect(tcp::socket* server) {
    ConnectionPool::stream_type s(io);
    s.socket().connect(acceptor.local_endpoint());
    *server = acceptor.accept();
    return s;
  }

  // Releases `n` new connections in turn, each with `max_idle`; returns their local ports, oldest
  // first (the server sides go to `servers`).
  std::vector<unsigned short> release_new(int n, std::uint32_t max_idle, std::vector<tcp::socket>& servers) {
    std::vector<unsigned short> ports;
    for (int i = 0; i < n; ++i) {
      servers.emplace_back(io);
      auto c = connect(&servers.back());
      ports.push_back(c.socket().local_endpoint().port());
      pool.release_stream(endpoint, std::move(c), max_idle, std::chrono::seconds(30));
    }
    return ports;
  }
};

TEST_F(Fixture, ReusesLiveConnectionMostRecentFirst) {
  tcp::socket s1(io), s2(io);
  auto c1 = connect(&s1);
  auto c2 = connect(&s2);
  const auto port2 = c2.socket().local_endpoint().port();
  pool.release_stream(endpoint, std::move(c1), 8, std::chrono::seconds(30));
  pool.release_stream(endpoint, std::move(c2), 8, std::chrono::seconds(30));
  EXPECT_EQ(pool.idle_count(), 2u);
  auto got = pool.acquire(endpoint);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->socket().local_endpoint().port(), port2);
  EXPECT_EQ(pool.idle_count(), 1u);
}

TEST_F(Fixture, ConnectionClosedByOriginIsNotReused) {
  tcp::socket server(io);
  auto c = connect(&server);
  pool.release_stream(endpoint, std::move(c), 8, std::chrono::seconds(30));
  server.close();
  // The FIN is delivered by the kernel; wait for it with a bound, not a sleep of fixed length.
  for (int i = 0; i < 1000 && pool.idle_count() == 1; ++i) {
    auto got = pool.acquire(endpoint);
    if (got) {
      pool.release_stream(endpoint, std::move(*got), 8, std::chrono::seconds(30));
      std::this_thread::yield();
    }
  }
  EXPECT_FALSE(pool.acquire(endpoint));
}

TEST_F(Fixture, UnsolicitedBytesMakeAConnectionUnusable) {
  tcp::socket server(io);
  auto c = connect(&server);
  net::write(server, net::buffer("HTTP/1.1 200 OK\r\n", 17));
  pool.release_stream(endpoint, std::move(c), 8, std::chrono::seconds(30));
  for (int i = 0; i < 1000 && pool.idle_count() == 1; ++i) {
    auto got = pool.acquire(endpoint);
    if (got) pool.release_stream(endpoint, std::move(*got), 8, std::chrono::seconds(30));
  }
  EXPECT_FALSE(pool.acquire(endpoint));
}

// The peek that finds a pooled connection alive proves it drained: the read (or wait) for the
// answer to the request written on it is queued for the answer's edge without a try.
TEST_F(Fixture, ATakenConnectionIsProvedDrainedSoTheWaitForItsAnswerNeedsNoTry) {
  tcp::socket server(io);
  pool.release_stream(endpoint, connect(&server), 8, std::chrono::seconds(30));
  auto c = pool.acquire(endpoint);
  ASSERT_TRUE(c);
  EXPECT_FALSE(tls::edge::will_try(c->socket()));
  bool answered = false;
  c->async_wait_readable([&](boost::system::error_code ec) { answered = !ec; });
  io.poll();
  EXPECT_FALSE(answered);
  net::write(server, net::buffer("HTTP/1.1 204 No Content\r\n\r\n", 25));
  for (int i = 0; i < 1000 && !answered; ++i) io.run_one_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(answered);
}

// The origin's FIN came with the last bytes of its answer: the read of those bytes does not
// report it, the peek at the next checkout does.
TEST_F(Fixture, AFinThatCameWithTheAnswerIsSeenAtCheckout) {
  tcp::socket server(io);
  auto c = connect(&server);
  net::write(server, net::buffer("HTTP/1.1 204 No Content\r\n\r\n", 25));
  server.close();
  std::array<char, 64> buffer{};
  std::size_t got = 0;
  c.async_read_some(net::buffer(buffer), [&](boost::system::error_code ec, std::size_t n) {
    if (!ec) got = n;
  });
  for (int i = 0; i < 1000 && got == 0; ++i) io.run_one_for(std::chrono::milliseconds(5));
  ASSERT_EQ(got, 25u);
  pool.release_stream(endpoint, std::move(c), 8, std::chrono::seconds(30));
  // Loopback has the FIN there by now; bounded in case it is a moment late, as above.
  for (int i = 0; i < 1000 && pool.idle_count() == 1; ++i) {
    auto taken = pool.acquire(endpoint);
    if (taken) pool.release_stream(endpoint, std::move(*taken), 8, std::chrono::seconds(30));
    std::this_thread::yield();
  }
  EXPECT_FALSE(pool.acquire(endpoint));
}

// A pooled connection is watched for hang-ups (tls/edge_io.hpp): the short read of its next
// answer proves it drained, and the checkout after that trusts the proof for proof_lifetime.
struct WatchedPool : Fixture {
  tcp::socket server{io};
  std::array<char, 64> buffer{};

  // A connection that went through the pool once (watched, then proved drained by the peek).
  ConnectionPool::stream_type pooled() {
    pool.release_stream(endpoint, connect(&server), 8, std::chrono::seconds(30));
    auto c = pool.acquire(endpoint);
    EXPECT_TRUE(c);
    EXPECT_TRUE(c->known_drained());
    return std::move(*c);
  }
  // The session's read of an answer: a wait for its edge, then a read of what came.
  std::size_t read_answer(ConnectionPool::stream_type& c) {
    bool readable = false;
    c.async_wait_readable([&](boost::system::error_code ec) { readable = !ec; });
    for (int i = 0; i < 1000 && !readable; ++i) io.run_one_for(std::chrono::milliseconds(5));
    EXPECT_TRUE(readable);
    return c.try_read_some(net::buffer(buffer));
  }
  // A pooled connection that has just read its next answer whole, back in the pool.
  void answered_and_released() {
    auto c = pooled();
    net::write(server, net::buffer(answer));
    EXPECT_EQ(read_answer(c), answer.size());
    pool.release_stream(endpoint, std::move(c), 8, std::chrono::seconds(30));
  }
  static constexpr std::string_view answer = "HTTP/1.1 204 No Content\r\n\r\n";
};

TEST_F(WatchedPool, AShortAnswerReadLetsTheNextCheckoutTakeTheConnectionAsItIs) {
  auto c = pooled();
  net::write(server, net::buffer(answer));
  ASSERT_EQ(read_answer(c), answer.size());
  EXPECT_TRUE(c.known_drained());
  pool.release_stream(endpoint, std::move(c), 8, std::chrono::seconds(30));
  auto again = pool.acquire(endpoint);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->known_drained());
}

TEST_F(WatchedPool, AFinThatCameWithTheAnswerIsSeenAtCheckout) {
  auto c = pooled();
  net::write(server, net::buffer(answer));
  server.close();  // loopback: there with the answer, reported in the same event
  ASSERT_EQ(read_answer(c), answer.size());
  EXPECT_FALSE(c.known_drained());
  pool.release_stream(endpoint, std::move(c), 8, std::chrono::seconds(30));
  EXPECT_FALSE(pool.acquire(endpoint));
}

TEST_F(WatchedPool, AFinWhileIdleIsSeenAtCheckoutOnceTheReactorLooked) {
  answered_and_released();
  server.close();
  io.poll();  // the worker's loop: the FIN's edge
  EXPECT_FALSE(pool.acquire(endpoint));
}

// The window the proof leaves: a FIN the reactor has not looked at yet is missed by a checkout
// within proof_lifetime (nginx's keepalive cache has the same one), and caught by the peek after.
TEST_F(WatchedPool, AProofIsTrustedForItsLifetimeThenThePeekAsksAgain) {
  answered_and_released();
  server.close();  // the reactor does not look
  auto trusted = pool.acquire(endpoint);
  ASSERT_TRUE(trusted);  // taken on the proof, without a system call
  pool.release_stream(endpoint, std::move(*trusted), 8, std::chrono::seconds(30));
  clock.advance(ConnectionPool::proof_lifetime);
  EXPECT_FALSE(pool.acquire(endpoint));  // the peek saw the FIN
}

TEST_F(Fixture, ExpiresAfterKeepaliveTimeout) {
  tcp::socket server(io);
  pool.release_stream(endpoint, connect(&server), 8, std::chrono::seconds(30));
  clock.advance(std::chrono::seconds(29));
  pool.sweep();
  EXPECT_EQ(pool.idle_count(), 1u);
  clock.advance(std::chrono::seconds(2));
  pool.sweep();
  EXPECT_EQ(pool.idle_count(), 0u);
}

TEST_F(Fixture, ASurplusBeyondMaxIdleLingersThenTheSweepTrimsItToTheFreshest) {
  // A burst left 5 idle connections where 3 are kept: a burst right after reuses all 5; once they
  // have been idle for surplus_linger, the sweep closes the 2 oldest.
  std::vector<tcp::socket> servers;
  const auto ports = release_new(5, 3, servers);
  EXPECT_EQ(pool.idle_count(), 5u);
  clock.advance(ConnectionPool::surplus_linger - std::chrono::milliseconds(1));
  pool.sweep();
  EXPECT_EQ(pool.idle_count(), 5u);
  clock.advance(std::chrono::milliseconds(1));
  pool.sweep();
  ASSERT_EQ(pool.idle_count(), 3u);
  for (int i = 4; i >= 2; --i) {
    auto got = pool.acquire(endpoint);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->socket().local_endpoint().port(), ports[static_cast<std::size_t>(i)]);
  }
  EXPECT_EQ(pool.idle_count(), 0u);
}

TEST_F(Fixture, AConnectionReleasedAgainIsFreshAndTheSurplusIsTheOldest) {
  std::vector<tcp::socket> servers;
  const auto ports = release_new(3, 2, servers);
  clock.advance(ConnectionPool::surplus_linger - std::chrono::milliseconds(1));
  auto taken = pool.acquire(endpoint);  // the freshest, ports[2]
  ASSERT_TRUE(taken);
  pool.release_stream(endpoint, std::move(*taken), 2, std::chrono::seconds(30));
  clock.advance(std::chrono::milliseconds(1));
  pool.sweep();  // ports[0] idle for the linger: closed; ports[1] kept with ports[2]
  ASSERT_EQ(pool.idle_count(), 2u);
  EXPECT_EQ(pool.acquire(endpoint)->socket().local_endpoint().port(), ports[2]);
  EXPECT_EQ(pool.acquire(endpoint)->socket().local_endpoint().port(), ports[1]);
}

// A multiplexing client's streams come back in bursts and are asked for again at once: as many
// idle connections are kept as checkouts found none (each opened a new one) in the current or the
// last sweep interval; the sweep closes those beyond max_idle once idle for the linger, and two
// intervals without a miss bring the bound back to the surplus.
TEST_F(Fixture, KeepsAsManyAsCheckoutsFoundNoneBeyondTheSurplus) {
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(pool.acquire(endpoint));
  std::vector<tcp::socket> servers;
  release_new(10, 2, servers);
  EXPECT_EQ(pool.idle_count(), 10u);
  clock.advance(ConnectionPool::surplus_linger);
  pool.sweep();  // the misses are the last interval's now
  EXPECT_EQ(pool.idle_count(), 2u);
  release_new(8, 2, servers);
  EXPECT_EQ(pool.idle_count(), 10u);
  clock.advance(ConnectionPool::surplus_linger);
  pool.sweep();  // an interval without a miss: the bound is the surplus again
  EXPECT_EQ(pool.idle_count(), 2u);
  release_new(5, 2, servers);
  EXPECT_EQ(pool.idle_count(), ConnectionPool::surplus_factor * 2);
}

TEST_F(Fixture, BoundedBySurplusFactorTimesMaxIdleEvenWithinTheLinger) {
  std::vector<tcp::socket> servers;
  const auto ports = release_new(static_cast<int>(ConnectionPool::surplus_factor) * 2 + 3, 2, servers);
  ASSERT_EQ(pool.idle_count(), ConnectionPool::surplus_factor * 2);
  // The 3 oldest went as the newer came; the first one taken is the freshest.
  EXPECT_EQ(pool.acquire(endpoint)->socket().local_endpoint().port(), ports.back());
  pool.close(endpoint);
  EXPECT_EQ(pool.idle_count(), 0u);
}

TEST_F(Fixture, ZeroKeepaliveKeepsNothing) {
  tcp::socket server(io);
  pool.release_stream(endpoint, connect(&server), 0, std::chrono::seconds(30));
  EXPECT_EQ(pool.idle_count(), 0u);
}

// release() takes the stream by reference: one it does not keep is closed there, not left open in
// the caller's hands.
TEST_F(Fixture, AConnectionNotKeptIsClosed) {
  tcp::socket server(io);
  auto c = connect(&server);
  pool.release_stream(endpoint, std::move(c), 0, std::chrono::seconds(30));
  EXPECT_FALSE(c.is_open());
  std::array<char, 1> byte{};
  boost::system::error_code ec;
  server.read_some(net::buffer(byte), ec);
  EXPECT_EQ(ec, net::error::eof);
}

// The data path's slots: what the pool keeps leaves the slot, what it does not is closed there.
TEST_F(Fixture, ASlotNotKeptIsClosedAndAKeptOneLeavesItsSlot) {
  tcp::socket server(io);
  tls::StreamSlot slot;
  slot.emplace(connect(&server));
  pool.release(endpoint, std::move(slot), 0, std::chrono::seconds(30));
  EXPECT_FALSE(slot);
  std::array<char, 1> byte{};
  boost::system::error_code ec;
  server.read_some(net::buffer(byte), ec);
  EXPECT_EQ(ec, net::error::eof);

  tcp::socket server2(io);
  slot.emplace(connect(&server2));
  pool.release(endpoint, std::move(slot), 8, std::chrono::seconds(30));
  EXPECT_FALSE(slot);
  EXPECT_EQ(pool.idle_count(), 1u);
}

TEST_F(Fixture, AcquireIntoPlacesTheConnectionOrLeavesItEmpty) {
  tls::StreamSlot into;
  pool.acquire(endpoint, into);
  EXPECT_FALSE(into);
  tcp::socket server(io);
  auto c = connect(&server);
  const auto port = c.socket().local_endpoint().port();
  pool.release_stream(endpoint, std::move(c), 8, std::chrono::seconds(30));
  pool.acquire(endpoint, into);
  ASSERT_TRUE(into);
  EXPECT_EQ(into->socket().local_endpoint().port(), port);
  EXPECT_EQ(pool.idle_count(), 0u);
}

}  // namespace
}  // namespace sluice
