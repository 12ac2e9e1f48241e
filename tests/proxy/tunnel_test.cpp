// The Upgrade tunnel: TunnelWatch's close rules on a manual timeline, relay() over real
// loopback sockets (bytes both ways, pending bytes first, half-close, abort, back-pressure), and
// relay() over beast::test::stream with an operation failing at every point in turn.
#include "sluice/proxy/tunnel.hpp"
#include "sluice/proxy/tunnel_relay.hpp"

#include <gtest/gtest.h>

#include <array>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/_experimental/test/fail_count.hpp>
#include <boost/beast/_experimental/test/stream.hpp>

namespace sluice::proxy {

// test::stream has no half-close of its own: its close() also cancels this end's pending read,
// which the relay would take for a failure. A half-close is passed on as shutdown(SHUT_WR) passes
// it: the peer reads what is buffered, then EOF (the peer's close_remote()), while this end goes
// on reading. The test maps the relay's streams to their peers.
struct TestStreamPeers {
  static inline std::unordered_map<const boost::beast::test::stream*, boost::beast::test::stream*> of;
};

template <>
struct TunnelStream<boost::beast::test::stream> {
  static void half_close(boost::beast::test::stream& s) { TestStreamPeers::of.at(&s)->close_remote(); }
  static void abort(boost::beast::test::stream& s) { s.close(); }  // the peer reads EOF
};

namespace {

using namespace std::chrono_literals;
using Verdict = TunnelWatch::Verdict;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// ---- TunnelWatch ------------------------------------------------------------------------------

const Clock::time_point t0{std::chrono::hours(1)};

TEST(TunnelWatch, KeepsAnActiveTunnel) {
  TunnelWatch w(t0, 10s);
  EXPECT_EQ(w.check(t0 + 9s, 60s, false, false), Verdict::keep);
  w.last_activity = t0 + 9s;
  EXPECT_EQ(w.check(t0 + 18s, 60s, false, false), Verdict::keep);
  EXPECT_EQ(w.check(t0 + 19s, 60s, false, false), Verdict::idle);
}

TEST(TunnelWatch, NextCheckIsTheEarliestDeadline) {
  TunnelWatch w(t0, 10s);
  EXPECT_EQ(w.next_check(t0), t0 + TunnelWatch::check_period);  // the drain flag is polled
  TunnelWatch quick(t0, 100ms);
  EXPECT_EQ(quick.next_check(t0), t0 + 100ms);  // idle expiry comes first
  EXPECT_EQ(quick.check(t0 + 100ms, 60s, false, false), Verdict::idle);
  TunnelWatch drained(t0, 10s);
  EXPECT_EQ(drained.check(t0, 50ms, false, true), Verdict::keep);
  EXPECT_EQ(drained.next_check(t0), t0 + 50ms);  // drain expiry comes first
}

TEST(TunnelWatch, AReloadClosesTheTunnelAfterTheDrainTimeout) {
  TunnelWatch w(t0, 1h);
  EXPECT_EQ(w.check(t0 + 1s, 10min, true, false), Verdict::keep);
  EXPECT_EQ(w.closes_at(), t0 + 1s + 10min);
  // Activity does not postpone it, nor a later reload, nor a shorter timeout in a newer config.
  w.last_activity = t0 + 10min;
  EXPECT_EQ(w.check(t0 + 5min, 1s, true, false), Verdict::keep);
  EXPECT_EQ(w.check(t0 + 10min, 10min, true, false), Verdict::keep);
  EXPECT_EQ(w.check(t0 + 10min + 1s, 10min, true, false), Verdict::drained);
}

TEST(TunnelWatch, ADrainClosesTheTunnelAfterTheDrainTimeoutUnlessUndrained) {
  TunnelWatch w(t0, 1h);
  EXPECT_EQ(w.check(t0 + 1s, 2s, false, true), Verdict::keep);
  EXPECT_EQ(w.check(t0 + 2s, 2s, false, true), Verdict::keep);
  EXPECT_EQ(w.check(t0 + 2500ms, 2s, false, false), Verdict::keep);  // undrained: no deadline
  EXPECT_EQ(w.closes_at(), Clock::time_point::max());
  EXPECT_EQ(w.check(t0 + 10s, 2s, false, false), Verdict::keep);
  EXPECT_EQ(w.check(t0 + 20s, 2s, false, true), Verdict::keep);  // drained again: starts anew
  EXPECT_EQ(w.check(t0 + 22s, 2s, false, true), Verdict::drained);
}

// ---- relay over loopback ----------------------------------------------------------------------


struct Relay : ::testing::Test {
  net::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)};
  // client <-> client_side (sluice) ... origin_side (sluice) <-> origin
  tcp::socket client{io}, client_side{io}, origin_side{io}, origin{io};
  std::array<char, 4096> up{}, down{};
  SteadyClock clock;
  Clock::time_point activity{};
  std::optional<TunnelStats> stats;

  void SetUp() override {
    client.connect(acceptor.local_endpoint());
    client_side = acceptor.accept();
    origin_side.connect(acceptor.local_endpoint());
    origin = acceptor.accept();
  }

  void start(std::string_view client_pending = {}, std::string_view origin_pending = {},
             std::size_t buffer = 4096) {
    TunnelIo tio{std::span(up.data(), buffer), std::span(down.data(), buffer), client_pending,
                 origin_pending, &clock, &activity};
    net::co_spawn(io, relay(client_side, origin_side, tio), [this](std::exception_ptr e, TunnelStats s) {
      ASSERT_FALSE(e);
      stats = s;
    });
  }

  // Runs the loop until `done` (bounded: a hung tunnel fails the test instead of hanging it).
  template <class Pred>
  void run_until(Pred done) {
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < until) {
      if (io.stopped()) io.restart();  // it stops whenever it runs out of work
      io.run_for(10ms);
    }
    ASSERT_TRUE(done());
  }

  std::string read_exactly(tcp::socket& s, std::size_t n) {
    std::string out(n, '\0');
    bool finished = false;
    net::async_read(s, net::buffer(out), [&](boost::system::error_code ec, std::size_t got) {
      EXPECT_FALSE(ec) << ec.message();
      out.resize(got);
      finished = true;
    });
    run_until([&] { return finished; });
    return out;
  }

  boost::system::error_code read_end(tcp::socket& s) {
    char c;
    std::optional<boost::system::error_code> result;
    s.async_read_some(net::buffer(&c, 1), [&](boost::system::error_code ec, std::size_t) { result = ec; });
    run_until([&] { return result.has_value(); });
    return *result;
  }
};

TEST_F(Relay, CopiesBothWaysPendingFirstAndPassesHalfClosesOn) {
  start("early-client ", "early-origin ");
  net::write(client, net::buffer(std::string_view("hello")));
  EXPECT_EQ(read_exactly(origin, 18), "early-client hello");
  net::write(origin, net::buffer(std::string_view("world")));
  EXPECT_EQ(read_exactly(client, 18), "early-origin world");
  EXPECT_NE(activity, Clock::time_point{});

  // The client stops sending: the origin sees EOF, and can still answer.
  client.shutdown(tcp::socket::shutdown_send);
  EXPECT_EQ(read_end(origin), net::error::eof);
  net::write(origin, net::buffer(std::string_view("bye")));
  EXPECT_EQ(read_exactly(client, 3), "bye");
  EXPECT_FALSE(stats.has_value());  // one direction is still open
  origin.shutdown(tcp::socket::shutdown_send);
  EXPECT_EQ(read_end(client), net::error::eof);
  run_until([&] { return stats.has_value(); });
  EXPECT_EQ(stats->up, 18u);
  EXPECT_EQ(stats->down, 21u);
  EXPECT_FALSE(stats->failed);
}

TEST_F(Relay, AResetOnOneSideEndsBoth) {
  start();
  net::write(client, net::buffer(std::string_view("x")));
  EXPECT_EQ(read_exactly(origin, 1), "x");
  origin.set_option(net::socket_base::linger(true, 0));
  origin.close();  // RST
  run_until([&] { return stats.has_value(); });
  EXPECT_TRUE(stats->failed);
  EXPECT_FALSE(client_side.is_open());
  EXPECT_FALSE(origin_side.is_open());
  const auto ec = read_end(client);
  EXPECT_TRUE(ec == net::error::eof || ec == net::error::connection_reset) << ec.message();
}

TEST_F(Relay, ASlowReaderHoldsTheWriterBack) {
  // Small kernel buffers and a 1 KiB relay buffer: while the client reads nothing, what the origin
  // can push is bounded by the buffers on the way, not by the origin's appetite.
  for (auto* s : {&client, &client_side, &origin_side, &origin}) {
    s->set_option(net::socket_base::receive_buffer_size(16 * 1024));
    s->set_option(net::socket_base::send_buffer_size(16 * 1024));
  }
  start({}, {}, 1024);
  origin.non_blocking(true);
  std::vector<char> block(64 * 1024);
  std::iota(block.begin(), block.end(), 0);
  constexpr std::size_t offered = 64 * 1024 * 1024;
  std::size_t accepted = 0;
  const auto until = std::chrono::steady_clock::now() + 2s;
  int stalls = 0;
  while (accepted < offered && std::chrono::steady_clock::now() < until && stalls < 50) {
    boost::system::error_code ec;
    const auto n = origin.write_some(net::buffer(block.data() + accepted % block.size(),
                                                 block.size() - accepted % block.size()), ec);
    accepted += n;
    if (ec == net::error::would_block) {
      ++stalls;
      io.run_for(5ms);  // let the relay move what it can
    } else {
      ASSERT_FALSE(ec) << ec.message();
      io.poll();
    }
  }
  EXPECT_LT(accepted, 4u * 1024 * 1024) << "the relay read far ahead of its reader";
  EXPECT_GE(stalls, 50);
  // Everything the origin got rid of reaches the client intact, in order.
  const auto got = read_exactly(client, accepted);
  ASSERT_EQ(got.size(), accepted);
  for (std::size_t i = 0; i < accepted; ++i)
    ASSERT_EQ(got[i], block[i % block.size()]) << "at byte " << i;
}

// ---- relay over beast::test::stream, failing at every point ---------------------------------

// Both directions carry a pending part, a part read in several pieces, then the EOF each passes
// on as a half-close. The read or write the fail count names fails (and every one after it). The
// relay must then end, not hang, as failed; both of its streams are aborted (each peer reads to
// EOF) and what each peer got is a prefix of what it should get. From the first point at which
// nothing fails, the whole exchange passes.
TEST(RelayFailCount, FailAtEveryPointUntilItSucceeds) {
  namespace test = boost::beast::test;
  const std::string up = "early-client hello", down = "early-origin world";
  for (std::size_t n = 0; n < 64; ++n) {
    net::io_context io;
    test::fail_count fc(n);
    // client <-> client_side (sluice) ... origin_side (sluice) <-> origin; each of sluice's
    // sides holds what its peer sent, then EOF.
    test::stream client_side(io, fc, "hello"), origin_side(io, fc, "world");
    test::stream client(io), origin(io);
    client_side.connect(client);
    origin_side.connect(origin);
    client_side.close_remote();
    origin_side.close_remote();
    TestStreamPeers::of = {{&client_side, &client}, {&origin_side, &origin}};
    std::array<char, 4> up_buffer{}, down_buffer{};  // smaller than each part: several reads
    SteadyClock clock;
    Clock::time_point activity{};
    TunnelIo tio{up_buffer, down_buffer, "early-client ", "early-origin ", &clock, &activity};
    std::optional<TunnelStats> stats;
    net::co_spawn(io, relay(client_side, origin_side, tio), [&](std::exception_ptr e, TunnelStats s) {
      EXPECT_FALSE(e);
      stats = s;
    });
    io.run_for(5s);
    ASSERT_TRUE(stats.has_value()) << "point " << n << ": the relay hung";
    const auto got_up = origin.str(), got_down = client.str();
    EXPECT_TRUE(up.starts_with(got_up)) << "point " << n << ": " << got_up;
    EXPECT_TRUE(down.starts_with(got_down)) << "point " << n << ": " << got_down;
    // Both peers read to the end: the EOF passed on, or the abort.
    for (auto* peer : {&client, &origin}) {
      std::string rest(64, '\0');
      std::optional<boost::system::error_code> end;
      net::async_read(*peer, net::buffer(rest), [&](boost::system::error_code ec, std::size_t) { end = ec; });
      io.restart();
      io.run_for(5s);
      EXPECT_EQ(end, net::error::eof) << "point " << n;
    }
    if (stats->failed) continue;  // failed at point n: try with the failure one step later
    EXPECT_EQ(got_up, up);
    EXPECT_EQ(got_down, down);
    EXPECT_EQ(stats->up, up.size());
    EXPECT_EQ(stats->down, down.size());
    EXPECT_GT(n, 4u);  // the first points did fail
    TestStreamPeers::of.clear();
    return;
  }
  FAIL() << "never succeeded";
}

}  // namespace
}  // namespace sluice::proxy
