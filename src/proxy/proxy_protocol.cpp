#include "sluice/proxy/proxy_protocol.hpp"

#include <charconv>
#include <cstring>
#include <utility>

#include "sluice/core/per_worker.hpp"

namespace sluice::proxy {

namespace ip = boost::asio::ip;

namespace {

constexpr std::string_view v1_prefix = "PROXY ";
// §2.2: the v2 signature, which no valid HTTP or TLS first bytes can begin with.
constexpr std::array<unsigned char, 12> v2_signature{0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                                     0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
constexpr std::size_t v2_fixed = 16;

// The next space-separated word of `rest` (exactly one space between words, §2.1).
std::string_view next_word(std::string_view& rest) noexcept {
  const auto space = rest.find(' ');
  const auto word = rest.substr(0, space);
  rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
  return word;
}

// §2.1: a port is a decimal number 0..65535 (no sign, no leading zeros).
std::optional<std::uint16_t> parse_port(std::string_view text) noexcept {
  if (text.empty() || text.size() > 5 || (text.size() > 1 && text.front() == '0')) return std::nullopt;
  unsigned n = 0;
  const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (err != std::errc() || end != text.data() + text.size() || n > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(n);
}

std::optional<ip::address> parse_v1_address(std::string_view text, bool v6) noexcept {
  char buf[48];
  if (text.empty() || text.size() >= sizeof buf) return std::nullopt;
  text.copy(buf, text.size());
  buf[text.size()] = '\0';
  boost::system::error_code ec;
  if (v6) {
    const auto a = ip::make_address_v6(static_cast<const char*>(buf), ec);
    if (ec || a.scope_id() != 0) return std::nullopt;
    return ip::address(a);
  }
  const auto a = ip::make_address_v4(static_cast<const char*>(buf), ec);
  if (ec) return std::nullopt;
  return ip::address(a);
}

std::uint16_t be16(const char* p) noexcept {
  return static_cast<std::uint16_t>((static_cast<unsigned char>(p[0]) << 8) |
                                    static_cast<unsigned char>(p[1]));
}

}  // namespace

namespace {
PerWorker<ProxyProtocolRejections>& rejections() noexcept {
  static PerWorker<ProxyProtocolRejections> counters;
  return counters;
}
}  // namespace

ProxyProtocolRejections& proxy_protocol_rejections(unsigned worker) noexcept {
  return rejections()[worker];
}

std::uint64_t proxy_protocol_rejected(
    std::atomic<std::uint64_t> ProxyProtocolRejections::*field) noexcept {
  std::uint64_t total = 0;
  std::as_const(rejections()).for_each([&](const ProxyProtocolRejections& r) {
    total += (r.*field).load(std::memory_order_relaxed);
  });
  return total;
}

std::size_t ProxyHeaderParser::feed(std::span<const char> data) noexcept {
  std::size_t taken = 0;
  while (state_ == State::need_more && taken < data.size()) {
    const char c = data[taken++];
    if (have_ == 0) {
      if (c == 'P') {
        version_ = 1;
      } else if (static_cast<unsigned char>(c) == v2_signature[0]) {
        version_ = 2;
      } else {
        fail("not a PROXY protocol header");
        break;
      }
    }
    if (version_ == 1) {
      take_v1(c);
    } else {
      take_v2(c);
    }
  }
  return taken;
}

void ProxyHeaderParser::take_v1(char c) noexcept {
  if (have_ < v1_prefix.size() && c != v1_prefix[have_]) return fail("not a PROXY protocol header");
  if (have_ >= max_v1_length) return fail("v1 line longer than 107 bytes");
  line_[have_++] = c;
  const bool after_cr = have_ >= 2 && line_[have_ - 2] == '\r';
  if (c == '\n' && after_cr) {
    finish_v1();
  } else if (c == '\n' || after_cr) {
    fail("v1 line has a CR or LF other than its final CRLF");
  }
}

// §2.1: "PROXY" SP ("TCP4" | "TCP6") SP src SP dst SP sport SP dport CRLF, or "PROXY UNKNOWN"
// followed by anything up to CRLF, for which the connection's own addresses stand.
void ProxyHeaderParser::finish_v1() noexcept {
  std::string_view rest(line_.data() + v1_prefix.size(), have_ - v1_prefix.size() - 2);
  const auto family = next_word(rest);
  if (family == "UNKNOWN") {
    state_ = State::done;
    return;
  }
  if (family != "TCP4" && family != "TCP6") return fail("v1 protocol is not TCP4, TCP6 or UNKNOWN");
  const bool v6 = family == "TCP6";
  const auto src = parse_v1_address(next_word(rest), v6);
  const auto dst = parse_v1_address(next_word(rest), v6);
  const auto sport = parse_port(next_word(rest));
  const auto dport = parse_port(next_word(rest));
  if (!src || !dst) return fail("v1 address invalid or not of the family named");
  if (!sport || !dport || !rest.empty()) return fail("v1 ports invalid");
  source_ = *src;
  source_port_ = *sport;
  state_ = State::done;
}

void ProxyHeaderParser::take_v2(char c) noexcept {
  if (have_ < v2_signature.size()) {
    if (static_cast<unsigned char>(c) != v2_signature[have_]) return fail("v2 signature mismatch");
    line_[have_++] = c;
    return;
  }
  if (have_ < v2_fixed) {
    line_[have_++] = c;
    if (have_ == v2_fixed) start_v2_body();
    return;
  }
  // Address block kept; TLVs (§2.2.7) skipped.
  const std::size_t body_at = have_ - v2_fixed;
  if (body_at < v2_address_) line_[have_] = c;
  ++have_;
  if (have_ == v2_fixed + v2_length_) finish_v2();
}

// Byte 13: version (high nibble, must be 2) and command (LOCAL 0, PROXY 1); byte 14: family
// (UNSPEC 0, INET 1, INET6 2, UNIX 3) and transport (UNSPEC 0, STREAM 1, DGRAM 2); bytes 15-16:
// the length of the rest, which must hold the family's address block.
void ProxyHeaderParser::start_v2_body() noexcept {
  const auto ver_cmd = static_cast<unsigned char>(line_[12]);
  const auto fam = static_cast<unsigned char>(line_[13]);
  if ((ver_cmd >> 4) != 2) return fail("v2 version is not 2");
  const unsigned command = ver_cmd & 0x0f;
  if (command > 1) return fail("v2 command is neither LOCAL nor PROXY");
  const unsigned family = fam >> 4;
  const unsigned transport = fam & 0x0f;
  if (family > 3 || transport > 2) return fail("v2 unknown address family or transport");
  // An HTTP connection is a stream: a PROXY command describing a datagram is a confused sender.
  if (command == 1 && transport == 2) return fail("v2 transport is DGRAM on a stream connection");
  v2_length_ = be16(line_.data() + 14);
  if (v2_length_ > max_v2_length) return fail("v2 header longer than 4096 bytes");
  const std::size_t needed = family == 1 ? 12 : family == 2 ? 36 : family == 3 ? 216 : 0;
  if (v2_length_ < needed) return fail("v2 length shorter than its address block");
  // Only LOCAL's and UNSPEC/UNIX's addresses are ignored; IPv4 and IPv6 ones are kept.
  v2_address_ = command == 1 && (family == 1 || family == 2) ? needed : 0;
  if (v2_length_ == 0) finish_v2();
}

void ProxyHeaderParser::finish_v2() noexcept {
  state_ = State::done;
  const char* block = line_.data() + v2_fixed;
  if (v2_address_ == 12) {
    ip::address_v4::bytes_type b;
    std::memcpy(b.data(), block, 4);
    source_ = ip::address(ip::address_v4(b));
    source_port_ = be16(block + 8);
  } else if (v2_address_ == 36) {
    ip::address_v6::bytes_type b;
    std::memcpy(b.data(), block, 16);
    source_ = ip::address(ip::address_v6(b));
    source_port_ = be16(block + 32);
  }
}

}  // namespace sluice::proxy
