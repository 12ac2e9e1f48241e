#include "sluice/proxy/error_response.hpp"

#include <algorithm>
#include <cstdio>

#include <boost/beast/http/status.hpp>

namespace sluice::proxy {

std::size_t format_error(std::span<char> out, const ProxyError& error, std::string_view request_id,
                         bool keep_alive) {
  namespace http = boost::beast::http;
  const auto reason_phrase = http::obsolete_reason(static_cast<http::status>(error.status));
  char body[256];
  const auto detail = error.detail.substr(0, 128);
  // "upstream reset; not retried: retry budget exhausted"
  char reason[160];
  const int reason_len = std::snprintf(
      reason, sizeof reason, "%.*s%s%.*s", static_cast<int>(error.reason.size()), error.reason.data(),
      error.not_retried.empty() ? "" : "; not retried: ", static_cast<int>(error.not_retried.size()),
      error.not_retried.data());
  const auto why = std::string_view(reason, static_cast<std::size_t>(std::clamp(reason_len, 0, 159)));
  const int body_len = std::snprintf(
      body, sizeof body, "%u %.*s: %.*s%s%.*s\n", error.status,
      static_cast<int>(reason_phrase.size()), reason_phrase.data(),
      static_cast<int>(why.size()), why.data(),
      detail.empty() ? "" : " in upstream ", static_cast<int>(detail.size()), detail.data());
  char retry_after[40] = "";
  if (error.retry_after > 0)
    std::snprintf(retry_after, sizeof retry_after, "Retry-After: %u\r\n", error.retry_after);
  const int n = std::snprintf(
      out.data(), out.size(),
      "HTTP/1.1 %u %.*s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
      "Sluice-Error: %.*s\r\n%s%s%.*s%s%s\r\n%s",
      error.status, static_cast<int>(reason_phrase.size()), reason_phrase.data(), body_len,
      static_cast<int>(why.size()), why.data(), retry_after,
      request_id.empty() ? "" : "X-Request-Id: ", static_cast<int>(request_id.size()),
      request_id.data(), request_id.empty() ? "" : "\r\n",
      keep_alive ? "" : "Connection: close\r\n", body);
  return static_cast<std::size_t>(std::clamp(n, 0, static_cast<int>(out.size()) - 1));
}

std::size_t error_body_size(std::string_view response) {
  const auto end = response.find("\r\n\r\n");
  return end == std::string_view::npos ? 0 : response.size() - end - 4;
}

}  // namespace sluice::proxy
