#pragma once
// Listening sockets handed to this process instead of bound by it: by systemd socket activation
// (sluice.socket) or by the previous sluice during a binary upgrade. Both use the sd_listen_fds(3)
// convention: LISTEN_PID = our PID, LISTEN_FDS = n, the sockets are descriptors 3 .. 3+n-1.
//
// Each configured listen address takes the inherited socket bound to that address (matched with
// getsockname; a configured port 0 takes any inherited socket on that host). Sockets nobody takes
// are closed, with a warning naming their address. Control thread, at start-up only.
#include <optional>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

namespace sluice {

class InheritedListeners {
public:
  // Takes the descriptors from the environment and unsets LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES,
  // so that processes we start do not believe they are theirs. Descriptors that are not
  // listening TCP sockets are closed with a warning.
  static InheritedListeners from_environment();
  // Adopts these listening sockets (tests).
  explicit InheritedListeners(std::vector<int> fds);
  InheritedListeners() = default;
  ~InheritedListeners();  // close_unused()
  InheritedListeners(InheritedListeners&& other) noexcept;
  InheritedListeners& operator=(InheritedListeners&&) = delete;
  InheritedListeners(const InheritedListeners&) = delete;

  // The inherited socket bound to `where` (ownership passes to the caller), or nullopt.
  std::optional<int> take(const boost::asio::ip::tcp::endpoint& where);
  std::size_t size() const noexcept { return sockets_.size(); }
  void close_unused();

private:
  struct Socket {
    int fd;
    boost::asio::ip::tcp::endpoint bound;
  };
  std::vector<Socket> sockets_;
};

// The address a socket is bound to (getsockname), or nullopt if it is not an inet socket.
std::optional<boost::asio::ip::tcp::endpoint> bound_endpoint(int fd);

}  // namespace sluice
