#include "wire.hpp"

#include <boost/beast/http/status.hpp>
#include <charconv>
#include <vector>

namespace sluice::origin {

std::string_view pattern_slice(std::size_t n) {
  static const std::vector<char> bytes = [] {
    std::vector<char> b(pattern_slice_max);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = body_pattern[i % body_pattern.size()];
    return b;
  }();
  return {bytes.data(), n};
}

void append_decimal(std::string& out, std::uint64_t v) {
  char digits[20];
  const auto r = std::to_chars(digits, digits + sizeof digits, v);
  out.append(digits, r.ptr);
}

void append_hex(std::string& out, std::uint64_t v) {
  char digits[16];
  const auto r = std::to_chars(digits, digits + sizeof digits, v, 16);
  out.append(digits, r.ptr);
}

void append_status_line(std::string& out, unsigned status) {
  namespace http = boost::beast::http;
  std::string_view reason = http::obsolete_reason(http::int_to_status(status));
  // Beast names codes it does not know "<unknown-status>"; a plain word keeps the line tidy.
  if (reason.starts_with('<')) reason = "Status";
  out.append("HTTP/1.1 ");
  append_decimal(out, status);
  out.push_back(' ');
  out.append(reason);
  out.append("\r\n");
}

}  // namespace sluice::origin
