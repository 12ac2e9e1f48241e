#pragma once
// Listening sockets handed to this process instead of bound by it: by systemd socket activation
// (sluice.socket) or by the previous sluice during a binary upgrade. Both use the sd_listen_fds(3)
// convention: LISTEN_PID = our PID, LISTEN_FDS = n, the sockets are descriptors 3 .. 3+n-1.
//
// Each configured listen address takes the inherited socket bound to that address (matched with
// getsockname; a configured port 0 takes the inherited sockets of one port on that host, the first
// passed, as a port-0 listener of the old process had a port of its own). Sockets nobody takes
// are closed, with a warning naming their address. Control thread, at start-up only.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

namespace sluice {

// LISTEN_FDNAMES name of the admin listener in a binary upgrade (the others are "listen").
inline constexpr std::string_view admin_fd_name = "sluice-admin";

class InheritedListeners {
public:
  // Takes the descriptors from the environment and unsets LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES,
  // so that processes we start do not believe they are theirs. Descriptors that are not
  // listening TCP sockets are closed with a warning.
  static InheritedListeners from_environment();
  // Adopts these listening sockets (tests).
  explicit InheritedListeners(std::vector<int> fds, std::vector<std::string> names = {});
  InheritedListeners() = default;
  ~InheritedListeners();  // close_unused()
  InheritedListeners(InheritedListeners&& other) noexcept;
  InheritedListeners& operator=(InheritedListeners&&) = delete;
  InheritedListeners(const InheritedListeners&) = delete;

  // The inherited socket bound to `where` (ownership passes to the caller), or nullopt.
  std::optional<int> take(const boost::asio::ip::tcp::endpoint& where);
  // Every inherited socket bound to `where`: a binary upgrade passes one per old worker
  // (SO_REUSEPORT sockets, each with its own accept queue, none of which may be closed).
  std::vector<int> take_all(const boost::asio::ip::tcp::endpoint& where);
  // The socket passed under LISTEN_FDNAMES name `name` (the admin listener: admin_fd_name).
  std::optional<int> take_named(std::string_view name);
  std::size_t size() const noexcept { return sockets_.size(); }
  void close_unused();

private:
  struct Socket {
    int fd;
    boost::asio::ip::tcp::endpoint bound;
    std::string name;  // LISTEN_FDNAMES entry; "" when none
  };
  std::vector<Socket> sockets_;
};

// The address a socket is bound to (getsockname), or nullopt if it is not an inet socket.
std::optional<boost::asio::ip::tcp::endpoint> bound_endpoint(int fd);

}  // namespace sluice
