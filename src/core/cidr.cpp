#include "sluice/core/cidr.hpp"

#include <charconv>
#include <string>

#include <boost/asio/detail/socket_ops.hpp>

namespace sluice {

namespace ip = boost::asio::ip;

ip::address unmapped(const ip::address& a) noexcept {
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    return ip::make_address_v4(ip::v4_mapped, a.to_v6());
  return a;
}

IpText ip_text(const ip::address& a) noexcept {
  IpText t;
  if (a.is_v4()) {
    const auto b = a.to_v4().to_bytes();
    char* out = t.chars.data();
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (i > 0) *out++ = '.';
      const unsigned v = b[i];
      if (v >= 100) *out++ = static_cast<char>('0' + v / 100);
      if (v >= 10) *out++ = static_cast<char>('0' + v / 10 % 10);
      *out++ = static_cast<char>('0' + v % 10);
    }
    t.size = static_cast<std::size_t>(out - t.chars.data());
    return t;
  }
  // Rare on the data path (IPv6 clients), and inet_ntop's compression rules are worth keeping.
  boost::system::error_code ec;
  const auto v6 = a.to_v6();
  const auto bytes = v6.to_bytes();
  if (boost::asio::detail::socket_ops::inet_ntop(AF_INET6, bytes.data(), t.chars.data(), t.chars.size(),
                                        v6.scope_id(), ec) != nullptr) {
    t.size = std::char_traits<char>::length(t.chars.data());
  }
  return t;
}

namespace {

// inet_pton needs a terminated string; an address is at most 45 characters (RFC 4291 §2.2).
std::optional<ip::address> address_of(std::string_view text) noexcept {
  char buf[64];
  if (text.empty() || text.size() >= sizeof buf) return std::nullopt;
  text.copy(buf, text.size());
  buf[text.size()] = '\0';
  boost::system::error_code ec;
  const auto a = ip::make_address(static_cast<const char*>(buf), ec);
  if (ec) return std::nullopt;
  return a;
}

// An address's bytes, IPv4 in the first four.
std::array<std::uint8_t, 16> bytes_of(const ip::address& a) noexcept {
  if (a.is_v6()) return a.to_v6().to_bytes();
  std::array<std::uint8_t, 16> b{};
  const auto four = a.to_v4().to_bytes();
  std::copy(four.begin(), four.end(), b.begin());
  return b;
}

// `c` with its host bits (those past the prefix) cleared.
Cidr network_of(Cidr c, unsigned max_bits) noexcept {
  for (unsigned b = c.prefix; b < max_bits; ++b)
    c.bytes[b / 8] &= static_cast<std::uint8_t>(~(1u << (7 - b % 8)));
  return c;
}

}  // namespace

std::optional<ip::address> parse_ip(std::string_view text) noexcept {
  const auto a = address_of(text);
  if (!a) return std::nullopt;
  return unmapped(*a);
}

bool Cidr::contains(const ip::address& a) const noexcept {
  if (a.is_v6() != v6) return false;
  const auto b = bytes_of(a);
  const unsigned whole = prefix / 8;
  for (unsigned i = 0; i < whole; ++i)
    if (b[i] != bytes[i]) return false;
  if (const unsigned rest = prefix % 8; rest != 0) {
    const auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
    if ((b[whole] & mask) != bytes[whole]) return false;
  }
  return true;
}

std::string Cidr::to_string() const {
  ip::address a;
  if (v6) {
    a = ip::address_v6(bytes);
  } else {
    a = ip::address_v4(ip::address_v4::bytes_type{bytes[0], bytes[1], bytes[2], bytes[3]});
  }
  return a.to_string() + "/" + std::to_string(prefix);
}

std::optional<Cidr> parse_cidr(std::string_view text, std::string* why) {
  auto fail = [&](std::string message) -> std::optional<Cidr> {
    if (why != nullptr) *why = std::move(message);
    return std::nullopt;
  };
  const auto slash = text.find('/');
  // A mapped IPv6 range stays IPv6 here: only peer addresses are unmapped.
  const auto a = address_of(text.substr(0, slash));
  if (!a) return fail("'" + std::string(text) + "' is not an address or CIDR range like \"10.0.0.0/8\"");
  Cidr c;
  c.v6 = a->is_v6();
  const unsigned max_bits = c.v6 ? 128 : 32;
  c.prefix = max_bits;
  if (slash != std::string_view::npos) {
    const auto bits = text.substr(slash + 1);
    unsigned n = 0;
    const auto [end, err] = std::from_chars(bits.data(), bits.data() + bits.size(), n);
    if (bits.empty() || err != std::errc() || end != bits.data() + bits.size() || n > max_bits)
      return fail("'" + std::string(text) + "': the prefix length must be 0.." +
                  std::to_string(max_bits));
    c.prefix = n;
  }
  c.bytes = bytes_of(*a);
  // Host bits below the prefix must be zero.
  const Cidr network = network_of(c, max_bits);
  if (network.bytes != c.bytes)
    return fail("'" + std::string(text) + "' has host bits set; did you mean \"" +
                network.to_string() + "\"?");
  return c;
}

bool contains(const CidrSet& set, const ip::address& a) noexcept {
  for (const auto& c : set)
    if (c.contains(a)) return true;
  return false;
}

}  // namespace sluice
