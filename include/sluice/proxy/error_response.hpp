#pragma once
// Responses the proxy generates itself (400, 404, 408, 413, 414, 431, 502, 503, 504): a short
// plain-text body and a `Sluice-Error` header naming the reason, so an operator (or a script) can
// tell sluice's own answers from the origin's.
#include <cstddef>
#include <span>
#include <string_view>

namespace sluice::proxy {

struct ProxyError {
  unsigned status = 0;
  std::string_view reason;  // Sluice-Error value; must point at static storage
  std::string_view detail{};  // appended to the body ("... in upstream app"); may be empty
  // Why the failure was not retried (static storage); appended as "; not retried: WHY".
  std::string_view not_retried{};
  unsigned retry_after = 0;  // seconds; > 0 adds Retry-After (RFC 9110 §10.2.3), as a 429 needs
};

// Formats the complete response (head and body) into `out`; returns the bytes used. `keep_alive`
// false adds Connection: close. `request_id` may be empty. `out` must hold 1 KiB.
std::size_t format_error(std::span<char> out, const ProxyError& error, std::string_view request_id,
                         bool keep_alive);

// The body size of a response format_error() made (what follows its head), for the access log.
std::size_t error_body_size(std::string_view response);

}  // namespace sluice::proxy
