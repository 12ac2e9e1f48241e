#include "sluice/runtime/listen_fds.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cstdlib>
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
  char** names = nullptr;
  const int n = sd_listen_fds_with_names(1, &names);
  if (n < 0) {
    spdlog::warn("LISTEN_FDS: {}; binding every listener", std::strerror(-n));
    return {};
  }
  std::vector<int> fds;
  std::vector<std::string> fd_names;
  for (int i = 0; i < n; ++i) {
    const int fd = SD_LISTEN_FDS_START + i;
    std::string name = names != nullptr && names[i] != nullptr ? names[i] : "";
    if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) > 0 && bound_endpoint(fd)) {
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // ours now: not for processes we start
      fds.push_back(fd);
      fd_names.push_back(std::move(name));
    } else {
      spdlog::warn("inherited descriptor {} is not a listening TCP socket: closed", fd);
      ::close(fd);
    }
  }
  if (names != nullptr) {
    for (int i = 0; i < n; ++i) std::free(names[i]);
    std::free(names);
  }
  return InheritedListeners(std::move(fds), std::move(fd_names));
}

InheritedListeners::InheritedListeners(std::vector<int> fds, std::vector<std::string> names) {
  for (std::size_t i = 0; i < fds.size(); ++i)
    if (auto ep = bound_endpoint(fds[i]))
      sockets_.push_back({fds[i], *ep, i < names.size() ? names[i] : std::string()});
}

std::vector<int> InheritedListeners::take_all(const tcp::endpoint& where) {
  std::vector<int> fds;
  const auto first = take(where);
  if (!first) return fds;
  fds.push_back(*first);
  // Port 0 (any port) takes the sockets of one port only, the first passed: each listener with
  // port 0 had a port of its own, and the old process passes its listeners in config order.
  const auto bound = bound_endpoint(*first);
  if (!bound) return fds;
  while (const auto fd = take(*bound)) fds.push_back(*fd);
  return fds;
}

std::optional<int> InheritedListeners::take_named(std::string_view name) {
  for (auto it = sockets_.begin(); it != sockets_.end(); ++it)
    if (it->name == name) {
      const int fd = it->fd;
      sockets_.erase(it);
      return fd;
    }
  return std::nullopt;
}

InheritedListeners::InheritedListeners(InheritedListeners&& other) noexcept
    : sockets_(std::move(other.sockets_)) {
  other.sockets_.clear();
}

InheritedListeners::~InheritedListeners() { close_unused(); }

std::optional<int> InheritedListeners::take(const tcp::endpoint& where) {
  for (auto it = sockets_.begin(); it != sockets_.end(); ++it) {
    const bool port_matches = where.port() == 0 || where.port() == it->bound.port();
    if (it->name != admin_fd_name && it->bound.address() == where.address() && port_matches) {
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
