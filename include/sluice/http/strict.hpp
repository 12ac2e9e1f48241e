#pragma once
// Strict HTTP/1.1 message-head rules (RFC 9112).
//
// Two stages:
//  1. scan_*_head() looks at the raw bytes of a head and rejects what must be rejected
//     byte-exactly: bare CR or LF, NUL and other control bytes,
//     obs-fold, whitespace between a field name and the colon, invalid tokens in the method or a
//     field name, invalid bytes in the target or a field value; it also finds where the head ends
//     and enforces the size limits (414 for the request line, 431 for the head).
//  2. the framing rules (detail::check_*, head_scanner.hpp) run on the fields found: both
//     Content-Length and Transfer-Encoding, several or malformed Content-Length values, a
//     Transfer-Encoding other than a final "chunked", a missing or repeated Host in HTTP/1.1.
//
// Pure functions, no allocation, safe from any thread.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sluice/http/message.hpp"

namespace sluice::http {

enum class Violation : std::uint8_t {
  none = 0,
  // raw scan
  bare_cr,
  bare_lf,
  control_byte,          // NUL or another CTL where none is allowed
  obs_fold,
  space_before_colon,
  bad_field_name,
  bad_field_value,
  bad_method,
  bad_target,
  bad_request_line,      // not "method SP target SP HTTP/x.y"
  bad_status_line,
  bad_version,
  uri_too_long,          // -> 414
  head_too_large,        // -> 431 (request) / 502 (response)
  // semantic
  content_length_with_transfer_encoding,
  bad_content_length,    // malformed, or several (even equal) values
  bad_transfer_encoding, // anything but a final "chunked"
  missing_host,
  repeated_host,
  bad_chunk,             // bad chunk size or chunk framing (reported by the body reader)
  bad_host,              // Host value is not uri-host [ ":" port ] (RFC 9112 §3.2 -> 400)
  framing_field_variant, // Transfer_Encoding, Content_Length: read as framing by some backends
  asterisk_form,         // "*" as the target of a method other than OPTIONS
  fragment,              // "#" in the request-target
  unsupported_coding,    // a transfer coding before "chunked" in a request -> 501
  // chunked body (ChunkedDecoder)
  chunk_line_too_long,   // a chunk-size line (with its extensions) above the limit
  trailer_too_large,
  bad_trailer,           // a malformed trailer line, or one carrying a framing field
};

// Short, human-readable reason, also used as the Sluice-Error header value ("bad content-length").
std::string_view describe(Violation v);

// HTTP status the proxy answers with when a *request* has this violation (400, 414, 431 or 501).
unsigned status_for(Violation v);

struct HeadScan {
  enum class Result : std::uint8_t { need_more, complete, invalid };
  Result result = Result::need_more;
  std::size_t head_size = 0;  // complete: bytes up to and including the final CRLFCRLF
  Violation violation = Violation::none;
  // Offset of the start line: the leading empty lines tolerated before a request line. Beast's
  // parser rejects them (bad_method), so feed it bytes[head_start, head_size), not bytes[0, ...).
  std::size_t head_start = 0;
};

// `bytes` is everything received so far on the connection for this message (it may contain the
// start of the body or of a pipelined request after the head). Call again with more bytes while
// the result is need_more. Enforces max_head (the whole head) and max_target (request-target).
// Leading empty lines before a request line are tolerated, as RFC 9112 §2.2 allows (they count
// toward head_size).
HeadScan scan_request_head(std::string_view bytes, std::size_t max_head, std::size_t max_target) noexcept;
HeadScan scan_response_head(std::string_view bytes, std::size_t max_head) noexcept;

// The authority of an absolute-form request-target ("http://a.example:8080/path"). RFC 9112
// §3.2.2: a server receiving one MUST ignore Host and use the target's authority, so a proxy that
// routed by Host while the origin follows the target could be steered to one route while the
// origin serves another host. `no`: origin-form (or "*"): Host stands. `bad`: a scheme other than
// http/https, userinfo ("user@host", deprecated and a classic spoofing device), an empty or
// malformed authority: 400.
struct TargetAuthority {
  enum class Form : std::uint8_t { no, ok, bad };
  Form form = Form::no;
  std::string_view authority;
};
TargetAuthority target_authority(std::string_view target) noexcept;

// RFC 9110 §6.5.1: a trailer field that frames, routes or modifies the request (Content-Length,
// Transfer-Encoding, Host, Trailer), also in the spelling with underscores that some backends fold
// into dashes. `name` is compared case-insensitively.
bool is_forbidden_trailer(std::string_view name) noexcept;

}  // namespace sluice::http
