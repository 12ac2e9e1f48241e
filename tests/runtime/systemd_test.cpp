#include "sluice/runtime/systemd.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace sluice {
namespace {

// A NOTIFY_SOCKET the test reads, as systemd's end of sd_notify.
class NotifySocket {
public:
  NotifySocket() {
    path_ = (std::filesystem::temp_directory_path() / ("sluice-notify-" + std::to_string(::getpid())))
                .string();
    std::filesystem::remove(path_);
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    path_.copy(a.sun_path, sizeof a.sun_path - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ::setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  ~NotifySocket() {
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("WATCHDOG_USEC");
    ::close(fd_);
    std::filesystem::remove(path_);
  }
  // The next datagram, "" when none is waiting (sd_notify sends synchronously).
  std::string next() {
    char buf[4096];
    const auto n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }

private:
  std::string path_;
  int fd_ = -1;
};

TEST(ServiceNotifier, WithoutNotifySocketItIsDisabled) {
  ::unsetenv("NOTIFY_SOCKET");
  boost::asio::io_context io;
  ServiceNotifier n(io);
  EXPECT_FALSE(n.enabled());
  n.ready("x");  // no effect, no error
}

TEST(ServiceNotifier, SendsReadyReloadingStopping) {
  NotifySocket sock;
  boost::asio::io_context io;
  ServiceNotifier n(io);
  ASSERT_TRUE(n.enabled());
  n.ready("config version 1, 2/3 servers up");
  EXPECT_EQ(sock.next(), "READY=1\nSTATUS=config version 1, 2/3 servers up");
  n.reloading();
  const auto reloading = sock.next();
  EXPECT_TRUE(reloading.starts_with("RELOADING=1\nMONOTONIC_USEC=")) << reloading;
  n.stopping();
  EXPECT_EQ(sock.next(), "STOPPING=1\nSTATUS=stopping");
  n.main_pid(1234);
  EXPECT_EQ(sock.next(), "MAINPID=1234");
}

TEST(ServiceNotifier, WatchdogPingsAtHalfThePeriod) {
  NotifySocket sock;
  ::setenv("WATCHDOG_USEC", "40000", 1);  // 40 ms: pings every 20 ms
  boost::asio::io_context io;
  ServiceNotifier n(io);
  EXPECT_EQ(n.watchdog_period(), std::chrono::microseconds(40000));
  n.start_watchdog();
  EXPECT_EQ(sock.next(), "WATCHDOG=1");  // one at once
  io.run_one();                          // the timer: the next ping
  EXPECT_EQ(sock.next(), "WATCHDOG=1");
  n.stop_watchdog();
  io.run();
}

}  // namespace
}  // namespace sluice
