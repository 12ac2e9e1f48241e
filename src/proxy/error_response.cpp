#include "sluice/proxy/error_response.hpp"

#include "sluice/config/config.hpp"

#include <algorithm>
#include <cstdio>

#include <boost/beast/http/status.hpp>

namespace sluice::proxy {

namespace {

// Into `out`: "upstream reset; not retried: retry budget exhausted".
std::string_view format_reason(std::span<char, 160> out, const ProxyError& error) {
  const int n = std::snprintf(
      out.data(), out.size(), "%.*s%s%.*s", static_cast<int>(error.reason.size()), error.reason.data(),
      error.not_retried.empty() ? "" : "; not retried: ", static_cast<int>(error.not_retried.size()),
      error.not_retried.data());
  return {out.data(), static_cast<std::size_t>(std::clamp(n, 0, static_cast<int>(out.size()) - 1))};
}

// The default body: "502 Bad Gateway: connect refused in upstream app\n" with the detail, the
// status line's words alone without.
std::string_view format_body(std::span<char, 256> out, const ProxyError& error, std::string_view phrase,
                             std::string_view why, bool detail) {
  const auto upstream = detail ? error.detail.substr(0, 128) : std::string_view();
  const int n = std::snprintf(
      out.data(), out.size(), "%u %.*s%s%.*s%s%.*s\n", error.status, static_cast<int>(phrase.size()),
      phrase.data(), detail ? ": " : "", static_cast<int>(detail ? why.size() : 0), why.data(),
      upstream.empty() ? "" : " in upstream ", static_cast<int>(upstream.size()), upstream.data());
  return {out.data(), static_cast<std::size_t>(std::clamp(n, 0, static_cast<int>(out.size()) - 1))};
}

}  // namespace

std::size_t format_error(std::span<char> out, const ProxyError& error, std::string_view request_id,
                         bool keep_alive, const ErrorStyle& style) {
  namespace http = boost::beast::http;
  const auto phrase = http::obsolete_reason(static_cast<http::status>(error.status));
  char reason[160];
  const auto why = format_reason(reason, error);
  char body_text[256];
  const auto body = style.has_page() ? style.page : format_body(body_text, error, phrase, why, style.detail);
  std::size_t used = 0;
  // Pieces past the end of `out` are cut (1 KiB holds the longest answer with its longest id).
  const auto put = [&](std::string_view piece) {
    const auto n = std::min(piece.size(), out.size() - used);
    std::copy_n(piece.data(), n, out.data() + used);
    used += n;
  };
  const auto field = [&](std::string_view name, std::string_view value) {
    if (value.empty()) return;
    put(name);
    put(": ");
    put(value);
    put("\r\n");
  };
  char number[24];
  const auto decimal = [&](std::size_t n) {
    const int len = std::snprintf(number, sizeof number, "%zu", n);
    return std::string_view(number, static_cast<std::size_t>(std::max(len, 0)));
  };
  put("HTTP/1.1 ");
  put(decimal(error.status));
  put(" ");
  put(phrase);
  put("\r\n");
  field("Date", style.date);
  field("Content-Type", style.has_page() ? style.page_type : "text/plain; charset=utf-8");
  field("Content-Length", decimal(body.size()));
  if (style.detail) field("Sluice-Error", why);
  if (error.retry_after > 0) field("Retry-After", decimal(error.retry_after));
  field("X-Request-Id", request_id);
  if (!keep_alive) put("Connection: close\r\n");
  put("\r\n");
  if (!style.has_page()) put(body);
  return used;
}

std::size_t body_bytes_sent(std::string_view response, std::size_t written) {
  const auto end = response.find("\r\n\r\n");
  if (end == std::string_view::npos) return 0;
  const auto head = end + 4;
  return written > head ? written - head : 0;
}

ErrorStyle error_style_of(const config::Config& config, const config::ErrorPages* route_pages,
                          unsigned status, std::string_view date) {
  ErrorStyle style;
  style.detail = config.server.error_detail == config::ErrorDetail::full;
  style.date = date;
  const config::ErrorPage* page = route_pages != nullptr ? route_pages->find(status) : nullptr;
  if (page == nullptr) page = config.server.error_pages.find(status);
  if (page != nullptr) {
    style.page = page->body;
    style.page_type = page->content_type;
  }
  return style;
}

}  // namespace sluice::proxy
