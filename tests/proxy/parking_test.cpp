// Parked idle connections over real loopback sockets: a parked connection wakes when its client
// sends (or closes), and only then, as a socket of the worker's reactor again; graceful shutdown,
// the shutdown timeout and the idle timeout close it at once and count it ended; it sits in the
// worker's session list while parked, out of the reactor, in one slab block. HeapTrim's decision.
#include "sluice/proxy/parking.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "sluice/config/config.hpp"
#include "sluice/telemetry/access_log.hpp"

namespace sluice::proxy {
namespace {

using namespace std::chrono_literals;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class ParkingTest : public ::testing::Test {
protected:
  ParkingTest()
      : access_(config::LogSection{}),
        worker_(0, io_, clock_, access_),
        lot_(
            worker_,
            [this](ParkedClient c) {
              woken_.emplace(std::move(c));
              ++wakes_;
            },
            [this] { ++ended_; }) {}
  // As Worker::join() does: what is still parked is closed before the lot and the session list
  // it is in go.
  ~ParkingTest() override {
    close_every_session(&SessionLink::close);
    io_.restart();
    io_.poll();
  }

  // What the worker does to its session list: close_if_idle on graceful shutdown and reload,
  // close at the shutdown timeout.
  void close_every_session(void (SessionLink::*how)()) {
    for (auto it = worker_.sessions.begin(); it != worker_.sessions.end();) ((*it++).*how)();
  }

  // The other end closed: a read gets end of file, not bytes.
  static void expect_eof(tcp::socket& socket) {
    char byte;
    boost::system::error_code ec;
    socket.read_some(net::buffer(&byte, 1), ec);
    EXPECT_EQ(ec, net::error::eof);
  }

  // A connected pair: the server side is parked, the client side is the test's.
  tcp::socket park() {
    tcp::acceptor acceptor(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    tcp::socket client(io_);
    client.connect(acceptor.local_endpoint());
    tcp::socket server = acceptor.accept();
    const auto peer = server.remote_endpoint().address();
    lot_.park({tls::Stream(std::move(server)), peer, clock_.now() + 60s});
    return client;
  }

  // Runs what is ready, and what becomes ready within a moment (loopback delivery).
  void settle() {
    for (int i = 0; i < 200 && !woken_ && ended_ == 0; ++i) {
      io_.restart();
      io_.run_for(5ms);
    }
    io_.restart();
    io_.poll();
  }

  net::io_context io_;
  ManualClock clock_;
  AccessLog access_;
  WorkerContext worker_;
  ParkingLot lot_;
  std::optional<ParkedClient> woken_;
  int ended_ = 0;
  int wakes_ = 0;
};

TEST_F(ParkingTest, WakesWithTheClientsBytesWhenItSends) {
  auto client = park();
  io_.poll();
  EXPECT_FALSE(woken_);
  EXPECT_EQ(lot_.size(), 1u);
  EXPECT_EQ(worker_.sessions.size(), 1u);
  EXPECT_EQ(worker_.sessions.front().deadline, clock_.now() + 60s);

  net::write(client, net::buffer(std::string_view("GET / HTTP/1.1\r\n\r\n")));
  settle();
  ASSERT_TRUE(woken_);
  EXPECT_EQ(ended_, 0);
  EXPECT_EQ(lot_.size(), 0u);
  EXPECT_TRUE(worker_.sessions.empty());
  EXPECT_EQ(woken_->client, net::ip::make_address("127.0.0.1"));
  EXPECT_EQ(woken_->idle_until, clock_.now() + 60s);
  ASSERT_TRUE(woken_->stream.is_open());
  std::string got(18, '\0');
  net::read(woken_->stream.socket(), net::buffer(got));
  EXPECT_EQ(got, "GET / HTTP/1.1\r\n\r\n");  // nothing was read while parked
}

TEST_F(ParkingTest, WakesWhenTheClientCloses) {
  auto client = park();
  client.close();
  settle();
  ASSERT_TRUE(woken_);  // the session reads the EOF and ends as for any idle connection
  expect_eof(woken_->stream.socket());
}

TEST_F(ParkingTest, GracefulShutdownClosesAParkedConnection) {
  auto client = park();
  close_every_session(&SessionLink::close_if_idle);
  settle();
  EXPECT_FALSE(woken_);
  EXPECT_EQ(ended_, 1);
  EXPECT_TRUE(worker_.sessions.empty());
  EXPECT_EQ(lot_.size(), 0u);
  expect_eof(client);
}

TEST_F(ParkingTest, ShutdownTimeoutClosesAParkedConnection) {
  auto client = park();
  close_every_session(&SessionLink::close);
  settle();
  EXPECT_FALSE(woken_);
  EXPECT_EQ(ended_, 1);
}

TEST_F(ParkingTest, IdleTimeoutClosesAParkedConnection) {
  auto client = park();
  auto& parked = worker_.sessions.front();
  EXPECT_FALSE(parked.holds_upstream());
  clock_.advance(60s);
  ASSERT_LE(parked.deadline, clock_.now());  // the worker's tick calls expire() now
  parked.expire();
  settle();
  EXPECT_FALSE(woken_);
  EXPECT_EQ(ended_, 1);
  EXPECT_TRUE(worker_.sessions.empty());
}

TEST_F(ParkingTest, ManyParkedConnectionsWakeOneByOne) {
  auto a = park();
  auto b = park();
  EXPECT_EQ(lot_.size(), 2u);
  net::write(b, net::buffer(std::string_view("x")));
  settle();
  ASSERT_TRUE(woken_);
  EXPECT_EQ(lot_.size(), 1u);
  EXPECT_EQ(worker_.sessions.size(), 1u);
}

TEST_F(ParkingTest, AParkedConnectionHoldsOneSlabBlockAndNothingOfTheHeap) {
  auto a = park();
  auto b = park();
  auto c = park();
  EXPECT_EQ(lot_.slab().used(), 3u);
  EXPECT_EQ(lot_.slab().oversized(), 0u);
  close_every_session(&SessionLink::close);
  EXPECT_EQ(lot_.slab().used(), 0u);  // at once: no wait left to complete
  EXPECT_EQ(ended_, 3);
}

TEST_F(ParkingTest, AWokenConnectionIsTheReactorsAgainAndCanParkAgain) {
  auto client = park();
  net::write(client, net::buffer(std::string_view("a")));
  settle();
  ASSERT_TRUE(woken_);
  auto& socket = woken_->stream.socket();
  ASSERT_NE(tls::edge::impl(socket).reactor_data_, nullptr);  // registered: asynchronous reads work
  char byte = 0;
  std::size_t got = 0;
  socket.async_read_some(net::buffer(&byte, 1), [&](boost::system::error_code ec, std::size_t n) {
    EXPECT_FALSE(ec);
    got = n;
  });
  io_.restart();
  io_.poll();
  EXPECT_EQ(got, 1u);
  EXPECT_EQ(byte, 'a');

  // Parked a second time, woken a second time: the descriptor left the lot's set when it woke.
  ParkedClient again = std::move(*woken_);
  woken_.reset();
  lot_.park(std::move(again));
  io_.restart();
  io_.poll();
  EXPECT_FALSE(woken_);
  net::write(client, net::buffer(std::string_view("b")));
  settle();
  ASSERT_TRUE(woken_);
  net::read(woken_->stream.socket(), net::buffer(&byte, 1));
  EXPECT_EQ(byte, 'b');
}

TEST_F(ParkingTest, BytesThatCameBeforeTheParkWakeItAtOnce) {
  tcp::acceptor acceptor(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  tcp::socket client(io_);
  client.connect(acceptor.local_endpoint());
  tcp::socket server = acceptor.accept();
  net::write(client, net::buffer(std::string_view("GET")));
  for (int i = 0; i < 200 && server.available() < 3; ++i) std::this_thread::sleep_for(1ms);  // loopback delivery
  ASSERT_EQ(server.available(), 3u);
  lot_.park({tls::Stream(std::move(server)), net::ip::make_address("127.0.0.1"), clock_.now() + 60s});
  settle();
  EXPECT_TRUE(woken_);
}

TEST_F(ParkingTest, ManyReadyAtOnceAllWake) {
  // More than one of the lot's epoll_wait batches (32) ready before the worker runs: all wake.
  std::vector<tcp::socket> clients;
  for (int i = 0; i < 80; ++i) clients.push_back(park());
  for (auto& c : clients) net::write(c, net::buffer(std::string_view("x")));  // delivered on return
  for (int i = 0; i < 200 && wakes_ < 80; ++i) {
    io_.restart();
    io_.run_for(5ms);
  }
  EXPECT_EQ(wakes_, 80);
  EXPECT_EQ(lot_.size(), 0u);
  EXPECT_TRUE(worker_.sessions.empty());
}

// A stream that is not open cannot leave the reactor: nothing is parked, the connection is
// counted ended (the worker's count of open connections goes down), and the lot stays empty.
TEST_F(ParkingTest, AStreamThatCannotLeaveTheReactorIsCountedEndedAndNotParked) {
  lot_.park({tls::Stream(tcp::socket(io_)), net::ip::make_address("127.0.0.1"), clock_.now() + 60s});
  EXPECT_EQ(ended_, 1);
  EXPECT_EQ(lot_.size(), 0u);
  EXPECT_TRUE(worker_.sessions.empty());
  EXPECT_EQ(lot_.slab().used(), 0u);
  settle();
  EXPECT_FALSE(woken_);
}

// A descriptor the lot's epoll set refuses (here /dev/null behind a TCP socket: epoll_ctl says
// EPERM) is closed and counted ended; its slab block goes back; the lot keeps working.
TEST_F(ParkingTest, ADescriptorTheLotsEpollSetRefusesIsClosedAndCountedEnded) {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  tcp::socket odd(io_);
  boost::system::error_code ec;
  odd.assign(tcp::v4(), fd, ec);  // Asio's reactor takes a descriptor it cannot poll as such
  ASSERT_FALSE(ec) << ec.message();
  lot_.park({tls::Stream(std::move(odd)), net::ip::make_address("127.0.0.1"), clock_.now() + 60s});
  EXPECT_EQ(ended_, 1);
  EXPECT_EQ(lot_.size(), 0u);
  EXPECT_TRUE(worker_.sessions.empty());
  EXPECT_EQ(lot_.slab().used(), 0u);
  errno = 0;
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);  // closed (nothing else opened a descriptor meanwhile)
  EXPECT_EQ(errno, EBADF);

  auto client = park();  // and the next connection parks and wakes as ever
  net::write(client, net::buffer(std::string_view("x")));
  settle();
  EXPECT_TRUE(woken_);
  EXPECT_EQ(ended_, 1);
}

TEST(Slab, RecyclesBlocksAndReturnsItsChunksWhenEmpty) {
  Slab slab;
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < 3 * Slab::blocks_per_chunk; ++i) blocks.push_back(slab.allocate(Slab::block_size));
  EXPECT_EQ(slab.chunks(), 3u);
  EXPECT_EQ(slab.used(), 3 * Slab::blocks_per_chunk);
  void* last = blocks.back();
  slab.deallocate(last, Slab::block_size);
  EXPECT_EQ(slab.allocate(Slab::block_size), last);  // the block just freed comes back first
  for (void* b : blocks) slab.deallocate(b, Slab::block_size);
  EXPECT_EQ(slab.used(), 0u);
  EXPECT_EQ(slab.chunks(), 1u);  // the burst's chunks went back to the heap
  void* big = slab.allocate(Slab::block_size + 1);  // beyond a block: the heap
  EXPECT_EQ(slab.used(), 0u);
  EXPECT_EQ(slab.oversized(), 1u);
  slab.deallocate(big, Slab::block_size + 1);
}

TEST(HeapTrim, TrimsOnceWhenSessionsFellFromTheirPeak) {
  HeapTrim trim(64);
  for (std::size_t n = 0; n <= 1000; n += 100) trim.observe(n);
  EXPECT_FALSE(trim.due(950));  // fell by 50 only
  EXPECT_TRUE(trim.due(10));    // the burst ended
  EXPECT_FALSE(trim.due(10));   // once: the peak starts again from 10
  trim.observe(50);
  EXPECT_FALSE(trim.due(0));    // 50 < 64
}

TEST(HeapTrim, SteadyWorkerNeverTrims) {
  HeapTrim trim(64);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(trim.due(500 + static_cast<std::size_t>(i % 10)));
}

}  // namespace
}  // namespace sluice::proxy
