#pragma once
// The PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and 2) that an L4 balancer
// in front sends before the connection's own bytes, carrying the client's address.
//
// ProxyHeaderParser is fed the connection's first bytes in pieces of any size (down to one byte)
// and stops at the header's last byte, so that what follows stays unread for TLS or HTTP. It is
// bounded and allocates nothing: a version 1 line is at most 107 bytes (§2.1); a version 2 header
// is the 16-byte fixed part plus at most max_v2_length bytes, whose TLVs are skipped unread (§2.2).
// One parser per connection, on its worker's thread.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include <boost/asio/ip/address.hpp>

namespace sluice::proxy {

class ProxyHeaderParser {
public:
  enum class State { need_more, done, invalid };
  static constexpr std::size_t max_v1_length = 107;  // "PROXY TCP6 <2 x 39> <2 x 5>\r\n"
  static constexpr std::size_t max_v2_length = 4096; // addresses + TLVs after the fixed 16 bytes

  // Takes bytes from the front of `data`, up to the header's end; returns how many it took. Once
  // the state is done or invalid it takes no more.
  std::size_t feed(std::span<const char> data) noexcept;

  State state() const noexcept { return state_; }
  // Why the header is invalid (static text), for the debug log.
  std::string_view error() const noexcept { return error_; }
  unsigned version() const noexcept { return version_; }
  // When done: the client address the header carries; none for a v2 LOCAL command (the
  // balancer's own health check), v1 UNKNOWN or a v2 family other than IPv4/IPv6: the spec
  // (§2.1, §2.2) says the connection's real addresses are used then.
  const std::optional<boost::asio::ip::address>& source() const noexcept { return source_; }
  std::uint16_t source_port() const noexcept { return source_port_; }
  std::size_t consumed() const noexcept { return have_; }

private:
  void take_v1(char c) noexcept;
  void take_v2(char c) noexcept;
  void finish_v1() noexcept;
  void start_v2_body() noexcept;
  void finish_v2() noexcept;
  void fail(std::string_view why) noexcept {
    state_ = State::invalid;
    error_ = why;
  }

  State state_ = State::need_more;
  std::string_view error_;
  unsigned version_ = 0;
  std::size_t have_ = 0;  // header bytes taken so far
  // v1: the line; v2: the fixed part (16 bytes) then up to 36 address bytes.
  std::array<char, max_v1_length> line_{};
  std::size_t v2_length_ = 0;   // bytes after the fixed part
  std::size_t v2_address_ = 0;  // of those, the address block kept in line_[16...]
  std::optional<boost::asio::ip::address> source_;
  std::uint16_t source_port_ = 0;
};

// Connections refused on a proxy_protocol listener (written only when a connection is refused,
// never per request). One set per worker, written by that worker alone (add_own), so that a flood
// of refused connections does not make every worker write one cache line; /metrics sums them.
struct ProxyProtocolRejections {
  std::atomic<std::uint64_t> untrusted{0};  // the peer is not in server.trusted_proxies
  std::atomic<std::uint64_t> malformed{0};  // not a valid header, or the connection ended in it
  std::atomic<std::uint64_t> timeout{0};    // no complete header within server.header_timeout
};
// Worker `worker`'s counters (default_worker_slots slots; see core/per_worker.hpp).
ProxyProtocolRejections& proxy_protocol_rejections(unsigned worker) noexcept;
// The sum over every worker, field by field (the control thread, at scrape).
std::uint64_t proxy_protocol_rejected(std::atomic<std::uint64_t> ProxyProtocolRejections::*field) noexcept;

}  // namespace sluice::proxy
