#include "sluice/http/head.hpp"

#include "sluice/http/rewrite.hpp"

#include <algorithm>
#include <charconv>

namespace sluice::http {

namespace bhttp = boost::beast::http;

void append_request_line(std::string& out, std::string_view method, std::string_view target,
                         const PathRewrite* path, bool has_host) {
  if (path != nullptr) {
    append_joined(out, {method, " "});
    append_rewritten_target(out, target, *path);
    out.append(" HTTP/1.1\r\n");
  } else {
    append_joined(out, {method, " ", target, " HTTP/1.1\r\n"});
  }
  if (!has_host) out.append("Host: \r\n");
}

ResponsePlan detail::plan_response(unsigned status, bool chunked, bool has_content_length,
                                   std::string_view transfer_encoding, bool is_head,
                                   unsigned client_version, bool client_keep_alive) noexcept {
  ResponsePlan p;
  p.body_expected = !is_head && status != 204 && status != 304;
  p.chunked_in = chunked;
  p.until_close = p.body_expected && !p.chunked_in && !has_content_length;
  const bool unknown_length = p.body_expected && (p.chunked_in || p.until_close);
  p.chunked_out = unknown_length && client_version == 11;
  p.refuse = p.body_expected && p.chunked_in && client_version != 11 &&
             has_codings_before_chunked(transfer_encoding);
  // An HTTP/1.0 client learns where such a body ends only from the close.
  p.keep_alive = client_keep_alive && !(unknown_length && client_version != 11);
  return p;
}

ChunkHeader::ChunkHeader(std::size_t n) noexcept {
  auto r = std::to_chars(data, data + 16, n, 16);
  r.ptr[0] = '\r';
  r.ptr[1] = '\n';
  size = static_cast<std::size_t>(r.ptr + 2 - data);
}

bool is_idempotent(bhttp::verb m) noexcept {
  return m == bhttp::verb::get || m == bhttp::verb::head || m == bhttp::verb::options ||
         m == bhttp::verb::trace || m == bhttp::verb::put || m == bhttp::verb::delete_;
}

std::string_view path_of(std::string_view target) noexcept {
  if (!target.empty() && target.front() == '/') return target;
  const auto scheme = target.find("://");
  if (scheme == std::string_view::npos) return target;
  const auto slash = target.find('/', scheme + 3);
  return slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
}

std::optional<std::chrono::seconds> keep_alive_timeout(std::string_view value) noexcept {
  const auto at = value.find("timeout=");
  if (at == std::string_view::npos) return std::nullopt;
  unsigned long seconds = 0;
  const auto begin = value.data() + at + 8;
  const auto r = std::from_chars(begin, value.data() + value.size(), seconds);
  if (r.ec != std::errc() || r.ptr == begin) return std::nullopt;
  return std::chrono::seconds(std::min<unsigned long>(seconds, 86400));
}

}  // namespace sluice::http
