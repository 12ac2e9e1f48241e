#include "sluice/runtime/listen_fds.hpp"

#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cstring>

#include <spdlog/spdlog.h>

namespace sluice {

namespace net = boost::asio;
using tcp = net::ip::tcp;

std::optional<tcp::endpoint> bound_endpoint(int fd) {
  tcp::endpoint ep;
  auto len = static_cast<socklen_t>(ep.capacity());
  if (getsockname(fd, ep.data(), &len) != 0) return std::nullopt;
  if (ep.data()->sa_family != AF_INET && ep.data()->sa_family != AF_INET6) return std::nullopt;
  ep.resize(len);
  return ep;
}

InheritedListeners InheritedListeners::from_environment() {
  // 1: unset LISTEN_* whatever the outcome (sd_listen_fds checks LISTEN_PID against getpid()).
  const int n = sd_listen_fds(1);
  if (n < 0) {
    spdlog::warn("LISTEN_FDS: {}; binding every listener", std::strerror(-n));
    return {};
  }
  std::vector<int> fds;
  for (int fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + n; ++fd) {
    if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) > 0 && bound_endpoint(fd)) {
      fds.push_back(fd);
    } else {
      spdlog::warn("inherited descriptor {} is not a listening TCP socket: closed", fd);
      ::close(fd);
    }
  }
  return InheritedListeners(std::move(fds));
}

InheritedListeners::InheritedListeners(std::vector<int> fds) {
  for (int fd : fds)
    if (auto ep = bound_endpoint(fd)) sockets_.push_back({fd, *ep});
}

InheritedListeners::InheritedListeners(InheritedListeners&& other) noexcept
    : sockets_(std::move(other.sockets_)) {
  other.sockets_.clear();
}

InheritedListeners::~InheritedListeners() { close_unused(); }

std::optional<int> InheritedListeners::take(const tcp::endpoint& where) {
  for (auto it = sockets_.begin(); it != sockets_.end(); ++it) {
    const bool port_matches = where.port() == 0 || where.port() == it->bound.port();
    if (it->bound.address() == where.address() && port_matches) {
      const int fd = it->fd;
      sockets_.erase(it);
      return fd;
    }
  }
  return std::nullopt;
}

void InheritedListeners::close_unused() {
  for (const auto& s : sockets_) {
    spdlog::warn("inherited listener {}:{} matches no listen address in the config: closed",
                 s.bound.address().to_string(), s.bound.port());
    ::close(s.fd);
  }
  sockets_.clear();
}

}  // namespace sluice
