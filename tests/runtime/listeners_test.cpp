#include "sluice/runtime/listeners.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

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

TEST(Listeners, BindsWhatNothingWasInheritedFor) {
  // A port of our own (kept open, SO_REUSEPORT lets the binds share it) and a socket inherited
  // on another one, which the address does not take.
  const int held = listening_socket(0);
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

}  // namespace
}  // namespace sluice
