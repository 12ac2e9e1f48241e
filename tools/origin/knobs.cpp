#include "knobs.hpp"

#include <boost/beast/core/string.hpp>
#include <charconv>

namespace sluice::origin {

namespace {

using boost::beast::iequals;

std::optional<bool> parse_flag(std::string_view v) {
  if (v == "1" || iequals(v, "true") || iequals(v, "yes") || iequals(v, "on")) return true;
  if (v == "0" || iequals(v, "false") || iequals(v, "no") || iequals(v, "off")) return false;
  return std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> parse_decimal(std::string_view text) {
  std::uint64_t v = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return v;
}

bool knobs::set(std::string_view name, std::string_view value) {
  if (iequals(name, "status")) {
    // 1xx cannot be a final response (RFC 9110 §15.2), and three digits is all a client parses.
    const auto v = parse_decimal(value);
    if (!v || *v < 200 || *v > 599) return false;
    status = static_cast<unsigned>(*v);
    return true;
  }
  if (iequals(name, "delay")) {
    const auto v = parse_decimal(value);
    // A day is far beyond any test timeout and keeps the timer arithmetic from overflowing.
    if (!v || *v > 86'400'000) return false;
    delay_ms = *v;
    return true;
  }
  if (iequals(name, "size")) {
    const auto v = parse_decimal(value);
    if (!v) return false;
    size = *v;
    return true;
  }
  if (iequals(name, "chunked")) {
    const auto v = parse_flag(value);
    if (!v) return false;
    chunked = *v;
    return true;
  }
  if (iequals(name, "echo")) {
    const auto v = parse_flag(value);
    if (!v) return false;
    echo = *v;
    return true;
  }
  if (iequals(name, "websocket")) {
    const auto v = parse_flag(value);
    if (!v) return false;
    websocket = *v;
    return true;
  }
  if (iequals(name, "sink")) {
    if (iequals(value, "sha256")) {
      sink = sink_mode::sha256;
      return true;
    }
    const auto v = parse_flag(value);
    if (!v) return false;
    sink = *v ? sink_mode::count : sink_mode::off;
    return true;
  }
  if (iequals(name, "close")) {
    if (iequals(value, "mid"))
      close = close_mode::mid;
    else if (iequals(value, "before"))
      close = close_mode::before;
    else if (iequals(value, "after"))
      close = close_mode::after;
    else if (iequals(value, "none") || value == "0")
      close = close_mode::none;
    else
      return false;
    return true;
  }
  return true;
}

std::string_view target_path(std::string_view target) {
  // RFC 9112 §3.2.2: absolute-form is allowed towards any server; take its path.
  if (!target.empty() && target.front() != '/') {
    const auto scheme = target.find("://");
    if (scheme != std::string_view::npos) {
      const auto slash = target.find('/', scheme + 3);
      target = slash == std::string_view::npos ? std::string_view{"/"} : target.substr(slash);
    }
  }
  return target.substr(0, target.find('?'));
}

}  // namespace sluice::origin
