#include "sluice/runtime/listeners.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include <boost/asio/write.hpp>
#include <gtest/gtest.h>

#include "sluice/runtime/listen_fds.hpp"

namespace sluice {
namespace {

using tcp = boost::asio::ip::tcp;

// A listening SO_REUSEPORT socket on 127.0.0.1:`port` (0: the kernel picks), like each worker of
// the process a binary upgrade replaces has one.
int listening_socket(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int on = 1;
  EXPECT_EQ(::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(fd, 16), 0);
  return fd;
}

std::vector<Listeners::Address> one_address(std::uint16_t port) {
  return {{config::HostPort{"127.0.0.1", port}, -1}};
}

TEST(Listeners, AdoptsEveryInheritedSocketOfAnAddressWhenMoreThanWorkers) {
  const int first = listening_socket(0);
  const auto port = bound_endpoint(first)->port();
  const std::vector<int> passed{first, listening_socket(port), listening_socket(port)};
  InheritedListeners inherited(passed);
  boost::asio::io_context io;
  auto pending = Listeners{}.bind_new(io, one_address(port), 2, &inherited);
  ASSERT_EQ(pending.entries.size(), 1u);
  const auto& entry = pending.entries[0];
  EXPECT_TRUE(entry.inherited);
  ASSERT_EQ(entry.per_worker.size(), 3u);  // none closed: each is an accept queue of its own
  std::vector<int> fds;
  for (auto& a : pending.entries[0].per_worker) fds.push_back(a.native_handle());
  EXPECT_EQ(fds, passed);
  EXPECT_EQ(entry.shown, "127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(inherited.size(), 0u);
}

TEST(Listeners, SharesOneInheritedSocketAcrossTheWorkers) {
  const int fd = listening_socket(0);
  const auto port = bound_endpoint(fd)->port();
  InheritedListeners inherited({fd});
  boost::asio::io_context io;
  auto pending = Listeners{}.bind_new(io, one_address(port), 3, &inherited);
  ASSERT_EQ(pending.entries.size(), 1u);
  auto& entry = pending.entries[0];
  ASSERT_EQ(entry.per_worker.size(), 3u);  // the socket and two dup()s: one accept queue
  std::set<int> distinct;
  for (auto& a : entry.per_worker) {
    distinct.insert(a.native_handle());
    EXPECT_EQ(a.local_endpoint().port(), port);
  }
  EXPECT_EQ(distinct.size(), 3u);
  EXPECT_EQ(entry.per_worker[0].native_handle(), fd);
}

// A socket bound to 127.0.0.1 and a kernel-picked port, not listening, that the binds may share
// (SO_REUSEADDR and SO_REUSEPORT): the port stays ours for the test, and nothing listens on it.
int reserved_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int on = 1;
  EXPECT_EQ(::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on), 0);
  EXPECT_EQ(::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

TEST(Listeners, BindsWhatNothingWasInheritedFor) {
  // A port of our own and a socket inherited on another one, which the address does not take.
  const int held = reserved_port();
  const auto port = bound_endpoint(held)->port();
  InheritedListeners inherited({listening_socket(0)});
  boost::asio::io_context io;
  auto pending = Listeners{}.bind_new(io, one_address(port), 2, &inherited);
  ASSERT_EQ(pending.entries.size(), 1u);
  EXPECT_FALSE(pending.entries[0].inherited);
  EXPECT_EQ(pending.entries[0].per_worker.size(), 2u);
  EXPECT_EQ(inherited.size(), 1u);
  ::close(held);
}

TEST(Listeners, RefusesAnAddressAnotherSocketListensOnEvenWithSoReuseport) {
  // Another process's worker socket, as a second sluice would find the first one's: SO_REUSEPORT
  // and the same user, so a plain bind would join it.
  const int other = listening_socket(0);
  const auto port = bound_endpoint(other)->port();
  boost::asio::io_context io;
  try {
    (void)Listeners{}.bind_new(io, one_address(port), 2);
    ADD_FAILURE() << "bound an address another socket listens on";
  } catch (const ListenError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot listen on 127.0.0.1:" + std::to_string(port) +
                                         ": address already in use by sluice_tests (pid " +
                                         std::to_string(::getpid()) + ")");
  }
  // The inherited socket of an upgrade on that address is taken, not refused.
  InheritedListeners inherited({other});
  auto pending = Listeners{}.bind_new(io, one_address(port), 2, &inherited);
  ASSERT_EQ(pending.entries.size(), 1u);
  EXPECT_TRUE(pending.entries[0].inherited);
}

// TCP_DEFER_ACCEPT as the kernel reports it: 0 when off, the seconds (rounded up to a
// retransmission period) when on.
int deferred_seconds(int fd) {
  int value = -1;
  socklen_t len = sizeof value;
  EXPECT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &value, &len), 0);
  return value;
}

TEST(Listeners, BindsWithDeferredAcceptUnlessTurnedOff) {
  boost::asio::io_context io;
  Listeners on;
  auto deferred = on.bind_new(io, one_address(0), 2);
  ASSERT_EQ(deferred.entries.size(), 1u);
  for (auto& a : deferred.entries[0].per_worker) EXPECT_GT(deferred_seconds(a.native_handle()), 0);

  Listeners off;
  off.set_defer_accept(false);
  auto plain = off.bind_new(io, one_address(0), 2);
  for (auto& a : plain.entries[0].per_worker) EXPECT_EQ(deferred_seconds(a.native_handle()), 0);
}

TEST(Listeners, AdoptedSocketsFollowTheSetting) {
  // A binary upgrade's or systemd's socket was set up by someone else: the config decides.
  const int fd = listening_socket(0);
  ASSERT_EQ(deferred_seconds(fd), 0);
  InheritedListeners inherited({fd});
  boost::asio::io_context io;
  auto pending = Listeners{}.bind_new(io, one_address(bound_endpoint(fd)->port()), 1, &inherited);
  ASSERT_EQ(pending.entries.size(), 1u);
  EXPECT_GT(deferred_seconds(pending.entries[0].per_worker[0].native_handle()), 0);
}

TEST(Listeners, DeferredAcceptLetsASilentConnectionWaitInTheKernel) {
  // What the option buys: a connection that has sent nothing is not in the accept queue, one
  // that has sent its first bytes is, with them readable at once.
  boost::asio::io_context io;
  auto pending = Listeners{}.bind_new(io, one_address(0), 1);
  auto& acceptor = pending.entries[0].per_worker[0];
  acceptor.non_blocking(true);
  const auto ep = acceptor.local_endpoint();
  tcp::socket silent(io), speaking(io);
  silent.connect(ep);
  speaking.connect(ep);
  boost::system::error_code ec;
  tcp::socket first(io);
  acceptor.accept(first, ec);
  EXPECT_EQ(ec, boost::asio::error::would_block);  // both handshakes done, neither handed over
  boost::asio::write(speaking, boost::asio::buffer(std::string_view("GET / HTTP/1.1\r\n")));
  pollfd ready{acceptor.native_handle(), POLLIN, 0};
  ASSERT_EQ(::poll(&ready, 1, 5000), 1);  // the segment's delivery makes the listener readable
  acceptor.accept(first, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(first.remote_endpoint(), speaking.local_endpoint());
  EXPECT_GT(first.available(), 0u);
}

}  // namespace
}  // namespace sluice
