#pragma once
// Responses the proxy generates itself (400, 404, 408, 413, 414, 431, 502, 503, 504): a short
// plain-text body, or the operator's page for the status ([server] error_pages). With
// error_detail = "full" a `Sluice-Error` header names the reason and the body says it too, so an
// operator (or a script) can tell sluice's own answers from the origin's; with "status" (the
// default) the client sees the status alone, and the reason stays in the access log.
#include <cstddef>
#include <span>
#include <string_view>

namespace sluice::config {
struct Config;
struct ErrorPages;
}  // namespace sluice::config

namespace sluice::proxy {

struct ProxyError {
  unsigned status = 0;
  std::string_view reason;  // Sluice-Error value; must point at static storage
  std::string_view detail{};  // appended to the body ("... in upstream app"); may be empty
  // Why the failure was not retried (static storage); appended as "; not retried: WHY".
  std::string_view not_retried{};
  unsigned retry_after = 0;  // seconds; > 0 adds Retry-After (RFC 9110 §10.2.3), as a 429 needs
};

// How an answer is told: the detail shown, the Date, and the operator's page if any.
struct ErrorStyle {
  bool detail = true;             // Sluice-Error, and the reason and upstream in the body
  std::string_view date{};        // the Date field's value; empty: none
  std::string_view page{};        // the body, sent after the head (not written by format_error)
  std::string_view page_type{};   // the page's Content-Type
  bool has_page() const noexcept { return !page_type.empty(); }
};

// Formats the response into `out`: the head, and the body unless `style` has a page (then the
// head only, with the page's length and type). Returns the bytes used. `keep_alive` false adds
// Connection: close. `request_id` may be empty. `out` must hold 1 KiB.
std::size_t format_error(std::span<char> out, const ProxyError& error, std::string_view request_id,
                         bool keep_alive, const ErrorStyle& style = {});

// How sluice's own answer with `status` is told ([server] error_detail, the route's pages
// `route_pages` (may be null) or the server's for it), with `date` as its Date.
ErrorStyle error_style_of(const config::Config& config, const config::ErrorPages* route_pages,
                          unsigned status, std::string_view date);

// Of the first `written` bytes of an answer that starts with `response` (a head, and perhaps
// some or all of its body, as format_error() or an idempotency answer makes it), how many were
// body: the access log's bytes_out, which counts what a client that left mid-answer got.
std::size_t body_bytes_sent(std::string_view response, std::size_t written);

}  // namespace sluice::proxy
