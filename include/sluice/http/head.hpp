#pragma once
// Small pieces of head handling shared by the head index (head_index.hpp) and the session: the
// refusal a request head gets, the request line towards the origin, how a final response is
// relayed (ResponsePlan), chunk-size lines, and a few readings of a request or response.
#include <chrono>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/verb.hpp>

#include "sluice/http/edge_rules.hpp"
#include "sluice/http/strict.hpp"

namespace sluice::http {

// Why a request head was refused: the status to answer with and the Sluice-Error reason.
struct Rejection {
  unsigned status = 0;  // 0: accepted
  std::string_view reason;
  explicit operator bool() const noexcept { return status != 0; }
};

// Appends the parts one after the other: one size check and growth of `out`, then a copy of each
// part, where an append per part checks and grows each time (a head's lines are 3-5 parts;
// bench/callgrind.sh: ~130 instructions per line, ~60 this way).
inline void append_joined(std::string& out, std::initializer_list<std::string_view> parts) {
  std::size_t n = 0;
  for (const auto p : parts) n += p.size();
  const auto at = out.size();
  out.resize(at + n);
  char* to = out.data() + at;
  for (const auto p : parts) {
    if (!p.empty()) std::memcpy(to, p.data(), p.size());
    to += p.size();
  }
}

// "METHOD target HTTP/1.1\r\n" towards the origin (always HTTP/1.1), the target rewritten by
// `path` when there is one; then "Host: \r\n" when the request has no Host (an HTTP/1.0 request
// may come without; forwarded as HTTP/1.1 it needs one, and with no authority to name it is
// empty, RFC 9110 §7.2, else the origin must answer 400, RFC 9112 §3.2; found by fuzz_request).
// Shared by both request writers (this one and splice_request_head()).
void append_request_line(std::string& out, std::string_view method, std::string_view target,
                         const PathRewrite* path, bool has_host);

// How a final response is relayed to the client (RFC 9112 §6.3).
struct ResponsePlan {
  bool body_expected = false;  // not HEAD, 204 or 304
  bool chunked_in = false;     // the origin's body is chunked
  bool until_close = false;    // no length: the body ends when the origin closes
  bool chunked_out = false;    // re-chunked towards an HTTP/1.1 client
  bool keep_alive = false;     // the client connection may stay open
  // Codings before chunked ("gzip, chunked") cannot be relayed to an HTTP/1.0 client (no
  // Transfer-Encoding there, RFC 9112 §6.1): such a response is refused, 502 bad response.
  bool refuse = false;
};

namespace detail {
// plan_response() over the facts it reads (shared with the head index).
ResponsePlan plan_response(unsigned status, bool chunked, bool has_content_length,
                           std::string_view transfer_encoding, bool is_head,
                           unsigned client_version, bool client_keep_alive) noexcept;
}  // namespace detail

// "1a2b\r\n": the chunk-size line for n bytes (RFC 9112 §7.1).
struct ChunkHeader {
  char data[24];
  std::size_t size;
  explicit ChunkHeader(std::size_t n) noexcept;
  std::string_view view() const noexcept { return {data, size}; }
};

inline constexpr std::string_view last_chunk = "0\r\n\r\n";

// RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT, DELETE.
bool is_idempotent(boost::beast::http::verb method) noexcept;

// The path of a request-target for routing: itself in origin-form, the part after the authority
// in absolute-form ("http://host/path" -> "/path", "http://host" -> "/").
std::string_view path_of(std::string_view target) noexcept;

// "timeout=5, max=100" (Keep-Alive, RFC 2068 §19.7.1): the origin's idle timeout, if it gives one
// (at most a day).
std::optional<std::chrono::seconds> keep_alive_timeout(std::string_view value) noexcept;

}  // namespace sluice::http
