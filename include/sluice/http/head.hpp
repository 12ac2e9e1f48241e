#pragma once
// The session's head handling as pure functions: parsing a head that scan_*_head() found complete
// (Beast + framing checks), and writing the head we forward. The session and the fuzz targets
// (fuzz/targets/) call the same code, so what is fuzzed is what runs.
#include <chrono>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>

#include "sluice/http/edge_rules.hpp"
#include "sluice/http/message.hpp"
#include "sluice/http/strict.hpp"

namespace sluice::http {

using RequestHeader = boost::beast::http::header<true, Fields>;
using ResponseHeader = boost::beast::http::header<false, Fields>;

// Why a request head was refused: the status to answer with and the Sluice-Error reason.
struct Rejection {
  unsigned status = 0;  // 0: accepted
  std::string_view reason;
  explicit operator bool() const noexcept { return status != 0; }
};

// `head` is exactly the bytes scan_request_head() reported complete (no leading empty lines, up
// to and including the final CRLFCRLF); `parser` is fresh. Beast parses them, then
// check_request_fields() applies the framing rules. The body is left to the caller.
Rejection parse_request_head(RequestParser& parser, std::string_view head);

// Likewise for a response head (any violation is a bad response: false). For a response to HEAD
// the parser is told there is no body.
bool parse_response_head(ResponseParser& parser, std::string_view head, bool is_head);

// "name: value\r\n" for every field, in order. With `rules`: the fields they drop are left out
// and their lines follow (docs/edge.md), in the same pass.
void append_fields(std::string& out, const Fields& fields);
void append_fields(std::string& out, const Fields& fields, const HeaderRules& rules,
                   const Variables& vars);

// What a route changes in the request head it forwards, applied while the head is written.
struct RequestEdits {
  const PathRewrite* path = nullptr;  // nullptr: the target as received
  const HeaderRules* rules = nullptr;
  const Variables* vars = nullptr;  // required with `rules`
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

// The request head towards the origin, after rewrite_request(): always HTTP/1.1, the framing
// line (Transfer-Encoding: chunked) when the body is relayed chunked, and a Host (empty when the
// client sent none, as HTTP/1.0 may: HTTP/1.1 requires one).
void append_request_head(std::string& out, const RequestHeader& req, bool chunked,
                         const RequestEdits& edits = {});

// The interim (1xx) response head passed on to an HTTP/1.1 client, after strip_hop_by_hop().
void append_interim_head(std::string& out, const ResponseHeader& res);

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

// `client_keep_alive`: the request allowed it and the worker is not stopping.
ResponsePlan plan_response(const ResponseParser& parser, bool is_head, unsigned client_version,
                           bool client_keep_alive);

namespace detail {
// plan_response() over the facts it reads (shared with the head index).
ResponsePlan plan_response(unsigned status, bool chunked, bool has_content_length,
                           std::string_view transfer_encoding, bool is_head,
                           unsigned client_version, bool client_keep_alive) noexcept;
}  // namespace detail

// The final response head towards the client, after rewrite_response(). `attempts` > 1 adds
// Sluice-Attempts. `rules` (with `vars`): the response header rules, applied in the same pass.
void append_response_head(std::string& out, const ResponseHeader& res, const ResponsePlan& plan,
                          unsigned client_version, unsigned attempts,
                          const HeaderRules* rules = nullptr, const Variables* vars = nullptr);

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
