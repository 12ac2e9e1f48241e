#include "sluice/runtime/address_holder.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/v6_only.hpp>

namespace sluice {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr std::string_view tcp_listen_state = "0A";  // TCP_LISTEN in /proc/net/tcp

// The whitespace-separated fields of a /proc/net/tcp line.
std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const auto start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

bool parse_hex(std::string_view text, std::uint32_t& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out, 16);
  return ec == std::errc() && end == text.data() + text.size();
}

// "0100007F:1F90" (IPv4) or 32 hex digits and a port (IPv6): the kernel prints each 32-bit word
// of the address as it lies in memory, read as a native integer, so copying the parsed words
// back into memory gives the address bytes in network order again on any byte order.
std::optional<tcp::endpoint> parse_local(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto hex = text.substr(0, colon);
  std::uint32_t port = 0;
  if (!parse_hex(text.substr(colon + 1), port) || port > 0xffff) return std::nullopt;
  if (hex.size() == 8) {
    std::uint32_t word = 0;
    if (!parse_hex(hex, word)) return std::nullopt;
    net::ip::address_v4::bytes_type bytes;
    std::memcpy(bytes.data(), &word, sizeof word);
    return tcp::endpoint(net::ip::address_v4(bytes), static_cast<unsigned short>(port));
  }
  if (hex.size() != 32) return std::nullopt;
  net::ip::address_v6::bytes_type bytes;
  for (std::size_t i = 0; i < 4; ++i) {
    std::uint32_t word = 0;
    if (!parse_hex(hex.substr(8 * i, 8), word)) return std::nullopt;
    std::memcpy(bytes.data() + 4 * i, &word, sizeof word);
  }
  return tcp::endpoint(net::ip::address_v6(bytes), static_cast<unsigned short>(port));
}

// The name of process `pid` (its comm), "" when unreadable.
std::string process_name(const std::filesystem::path& proc_dir) {
  std::ifstream in(proc_dir / "comm");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace

bool addresses_overlap(const tcp::endpoint& bound, const tcp::endpoint& where) {
  if (bound.port() != where.port()) return false;
  const auto& a = bound.address();
  const auto& b = where.address();
  if (a.is_v6() && a.is_unspecified() && b.is_v4()) return true;
  if (a.is_v4() != b.is_v4()) return false;
  return a == b || a.is_unspecified() || b.is_unspecified();
}

std::optional<unsigned long> listening_inode(std::string_view line, const tcp::endpoint& where) {
  const auto f = fields(line);
  if (f.size() < 10 || f[3] != tcp_listen_state) return std::nullopt;
  const auto bound = parse_local(f[1]);
  if (!bound || !addresses_overlap(*bound, where)) return std::nullopt;
  unsigned long inode = 0;
  const auto [end, ec] = std::from_chars(f[9].data(), f[9].data() + f[9].size(), inode);
  if (ec != std::errc() || inode == 0) return std::nullopt;
  return inode;
}

boost::system::error_code probe_address(const tcp::endpoint& where) {
  boost::system::error_code ec;
  if (where.port() == 0) return ec;
  net::io_context io;
  tcp::acceptor probe(io);
  // As the real sockets are bound (listeners.cpp), minus SO_REUSEPORT: SO_REUSEADDR lets the
  // probe past connections in TIME_WAIT, and nothing else.
  probe.open(where.protocol(), ec);
  if (!ec) probe.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec && where.address().is_v6()) probe.set_option(net::ip::v6_only(true), ec);
  if (!ec) probe.bind(where, ec);
  boost::system::error_code ignored;
  probe.close(ignored);
  return ec;
}

std::optional<std::string> address_holder(const tcp::endpoint& where) try {
  std::vector<std::string> sockets;  // "socket:[INODE]", as /proc/PID/fd/N links read
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    for (std::string line; std::getline(in, line);)
      if (const auto inode = listening_inode(line, where))
        sockets.push_back("socket:[" + std::to_string(*inode) + "]");
  }
  if (sockets.empty()) return std::nullopt;
  std::error_code ec;
  for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
    const auto pid = proc.path().filename().string();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    std::error_code fd_ec;  // another user's process: not readable, skipped
    for (const auto& fd : std::filesystem::directory_iterator(proc.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      const auto target = std::filesystem::read_symlink(fd.path(), link_ec).string();
      if (!link_ec && std::find(sockets.begin(), sockets.end(), target) != sockets.end())
        return process_name(proc.path()) + " (pid " + pid + ")";
    }
  }
  return std::nullopt;
} catch (const std::exception&) {
  return std::nullopt;  // a process that exited while its descriptors were read: not known
}

}  // namespace sluice
