#include "sluice/proxy/grpc.hpp"

#include <cstdint>

#include <boost/beast/core/string.hpp>

namespace sluice::proxy {

bool is_grpc_content_type(std::string_view ct) noexcept {
  constexpr std::string_view base = "application/grpc";
  if (ct.size() < base.size() || !boost::beast::iequals(ct.substr(0, base.size()), base)) return false;
  return ct.size() == base.size() || ct[base.size()] == '+' || ct[base.size()] == ';';
}

std::string_view grpc_status_for(unsigned status) noexcept {
  switch (status) {
    case 502: case 503: return "14";
    case 504: case 408: return "4";
    case 429: case 413: case 414: case 431: return "8";
    case 404: case 405: case 501: return "12";
    case 403: return "7";
    case 401: return "16";
    case 400: return "13";
    default: return "2";
  }
}

std::string_view grpc_message(std::string_view text, std::span<char> out) noexcept {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::size_t n = 0;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    const bool plain = c >= 0x20 && c <= 0x7e && c != '%';
    if (n + (plain ? 1 : 3) > out.size()) break;
    if (plain) {
      out[n++] = ch;
    } else {
      out[n++] = '%';
      out[n++] = hex[c >> 4];
      out[n++] = hex[c & 15];
    }
  }
  return {out.data(), n};
}

std::optional<std::chrono::nanoseconds> grpc_timeout(std::string_view value) noexcept {
  using namespace std::chrono;
  if (value.size() < 2 || value.size() > 9) return std::nullopt;
  std::int64_t n = 0;
  for (const char c : value.substr(0, value.size() - 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  switch (value.back()) {
    case 'H': return hours(n);
    case 'M': return minutes(n);
    case 'S': return seconds(n);
    case 'm': return milliseconds(n);
    case 'u': return microseconds(n);
    case 'n': return nanoseconds(n);
    default: return std::nullopt;
  }
}

}  // namespace sluice::proxy
