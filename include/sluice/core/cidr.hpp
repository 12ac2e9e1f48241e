#pragma once
// IP address ranges ("10.0.0.0/8", "2001:db8::/32", or one address) and sets of them, for
// trusted_proxies and a route's allow/deny lists. Plain values: parsed by the config loader,
// then read by any worker without locks. Matching allocates nothing.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/address.hpp>

namespace sluice {

struct Cidr {
  std::array<std::uint8_t, 16> bytes{};  // network address, host bits cleared
  unsigned prefix = 0;                   // bits that must match
  bool v6 = false;

  bool contains(const boost::asio::ip::address& a) const noexcept;
  std::string to_string() const;  // "10.0.0.0/8"
};

// "ADDRESS/BITS" or a bare address (a /32 or /128). Host bits set below the prefix
// ("10.1.2.3/8") are an error, as a typo more often than an intent; `why` says so.
std::optional<Cidr> parse_cidr(std::string_view text, std::string* why = nullptr);

// An address parsed without allocating (inet_pton); IPv4-mapped IPv6 (::ffff:a.b.c.d) becomes
// the IPv4 address, so that a dual-stack listener's peers match IPv4 ranges.
std::optional<boost::asio::ip::address> parse_ip(std::string_view text) noexcept;
boost::asio::ip::address unmapped(const boost::asio::ip::address& a) noexcept;

// An address as text, as address::to_string() writes it ("192.0.2.1", "2001:db8::1",
// "fe80::1%2"), without allocating: IPv4 by hand (to_string's inet_ntop formats through
// sprintf, ~1,100 instructions a connection), IPv6 with inet_ntop into the fixed buffer.
struct IpText {
  std::array<char, 64> chars{};  // an IPv6 address, a '%' and a scope id
  std::size_t size = 0;
  std::string_view view() const noexcept { return {chars.data(), size}; }
};
IpText ip_text(const boost::asio::ip::address& a) noexcept;

using CidrSet = std::vector<Cidr>;
bool contains(const CidrSet& set, const boost::asio::ip::address& a) noexcept;

}  // namespace sluice
