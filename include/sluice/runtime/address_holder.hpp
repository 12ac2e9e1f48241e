#pragma once
// Whether another process already listens on an address, and which one, before sluice binds it.
//
// Every worker binds its own SO_REUSEPORT socket per address, and SO_REUSEPORT lets any process
// of the same user join a group of listening sockets: a second sluice started on the address of
// a running one would bind without error and take a share of its connections. So before the
// first bind of an address, a probe socket is bound there WITHOUT SO_REUSEPORT: the kernel
// refuses it (EADDRINUSE) whenever any socket listens on an overlapping address, sluice or not,
// of any user. The probe holds nothing afterwards: a crashed sluice leaves no lock behind, its
// sockets die with it. A binary upgrade and systemd socket activation pass their sockets in
// (listen_fds.hpp) and bind nothing, so they are not probed.
//
// Control thread, at start-up and at a reload that adds an address.
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

namespace sluice {

// The error a bind of `where` would meet because something is bound there (EADDRINUSE), or an
// empty code. Port 0 is never in use.
boost::system::error_code probe_address(const boost::asio::ip::tcp::endpoint& where);

// The process that listens on `where`, as "sluice (pid 1234)", from /proc: nullopt when it
// cannot be seen (another user's process, or a /proc that hides it).
std::optional<std::string> address_holder(const boost::asio::ip::tcp::endpoint& where);

// Whether a socket listening on `bound` takes connections meant for `where`: the same port, and
// the same address or either one a wildcard (a v6 wildcard may be dual-stack: every v4 too).
bool addresses_overlap(const boost::asio::ip::tcp::endpoint& bound,
                       const boost::asio::ip::tcp::endpoint& where);

// One line of /proc/net/tcp or /proc/net/tcp6: the socket's inode when it listens on an address
// that overlaps `where` (same port; same address, or either side a wildcard), else nullopt.
std::optional<unsigned long> listening_inode(std::string_view proc_net_line,
                                             const boost::asio::ip::tcp::endpoint& where);

}  // namespace sluice
