#include "sluice/runtime/listen_fds.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace sluice {
namespace {

using tcp = boost::asio::ip::tcp;

// A listening socket on 127.0.0.1 (port 0: the kernel picks), as systemd would pass it.
int listening_socket() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(fd, 16), 0);
  return fd;
}

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(InheritedListeners, TakesTheSocketBoundToTheAddress) {
  const int a = listening_socket();
  const int b = listening_socket();
  const auto port_b = bound_endpoint(b)->port();
  InheritedListeners inherited({a, b});
  const tcp::endpoint want(boost::asio::ip::make_address("127.0.0.1"), port_b);
  EXPECT_EQ(inherited.take(want), b);
  EXPECT_EQ(inherited.take(want), std::nullopt);  // taken once
  EXPECT_EQ(inherited.size(), 1u);
  ::close(b);
}

TEST(InheritedListeners, OtherHostOrPortDoesNotMatch) {
  const int a = listening_socket();
  const auto port = bound_endpoint(a)->port();
  InheritedListeners inherited({a});
  EXPECT_EQ(inherited.take({boost::asio::ip::make_address("127.0.0.2"), port}), std::nullopt);
  EXPECT_EQ(inherited.take({boost::asio::ip::make_address("127.0.0.1"),
                            static_cast<unsigned short>(port + 1)}),
            std::nullopt);
}

TEST(InheritedListeners, PortZeroTakesAnySocketOnThatHost) {
  const int a = listening_socket();
  InheritedListeners inherited({a});
  EXPECT_EQ(inherited.take({boost::asio::ip::make_address("127.0.0.1"), 0}), a);
  ::close(a);
}

TEST(InheritedListeners, UnusedSocketsAreClosed) {
  const int a = listening_socket();
  {
    InheritedListeners inherited({a});
    EXPECT_TRUE(is_open(a));
  }
  EXPECT_FALSE(is_open(a));
}

TEST(InheritedListeners, WithoutListenFdsNothingIsInherited) {
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_PID");
  EXPECT_EQ(InheritedListeners::from_environment().size(), 0u);
}

TEST(InheritedListeners, ListenPidOfAnotherProcessIsIgnoredAndUnset) {
  ::setenv("LISTEN_FDS", "1", 1);
  ::setenv("LISTEN_PID", std::to_string(::getpid() + 1).c_str(), 1);
  EXPECT_EQ(InheritedListeners::from_environment().size(), 0u);
  EXPECT_EQ(::getenv("LISTEN_FDS"), nullptr);
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

int listening_socket_on_port(unsigned short port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(fd, 16), 0);
  return fd;
}

// A binary upgrade passes one SO_REUSEPORT socket per old worker for the same address.
TEST(InheritedListeners, TakeAllReturnsEverySocketOfTheAddressButNotTheAdminOne) {
  const int a = listening_socket_on_port(0);
  const auto port = bound_endpoint(a)->port();
  const int b = listening_socket_on_port(port);
  const int admin = listening_socket_on_port(0);
  InheritedListeners inherited({a, b, admin}, {"listen", "listen", std::string(admin_fd_name)});
  const auto all = inherited.take_all({boost::asio::ip::make_address("127.0.0.1"), 0});
  EXPECT_EQ(all, (std::vector<int>{a, b}));  // port 0 matches any port, but never the admin socket
  EXPECT_EQ(inherited.take_named(admin_fd_name), admin);
  EXPECT_EQ(inherited.size(), 0u);
  for (int fd : {a, b, admin}) ::close(fd);
}

// Two listeners with port 0 (a plain and a TLS one, as in tests) each had a port of their own in
// the old process: each takes the sockets of one port, in the order they were passed.
TEST(InheritedListeners, EachPortZeroListenerTakesTheSocketsOfOnePort) {
  const int plain1 = listening_socket_on_port(0);
  const int plain2 = listening_socket_on_port(bound_endpoint(plain1)->port());
  const int tls1 = listening_socket_on_port(0);
  const int tls2 = listening_socket_on_port(bound_endpoint(tls1)->port());
  InheritedListeners inherited({plain1, plain2, tls1, tls2});
  const tcp::endpoint any_port(boost::asio::ip::make_address("127.0.0.1"), 0);
  EXPECT_EQ(inherited.take_all(any_port), (std::vector<int>{plain1, plain2}));
  EXPECT_EQ(inherited.take_all(any_port), (std::vector<int>{tls1, tls2}));
  EXPECT_EQ(inherited.size(), 0u);
  for (int fd : {plain1, plain2, tls1, tls2}) ::close(fd);
}

}  // namespace
}  // namespace sluice
