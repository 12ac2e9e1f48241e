#pragma once
// What the session decides about a client's request before and while its bytes go upstream, as
// pure functions over the bytes already read: the head step of read_request_head(), the refusals
// of handle_request(), forward()'s Expect and Upgrade decisions, and one decoding pass over a
// chunked body (decode_chunked()). DownstreamSession and the request fuzz target (fuzz/targets/request.cpp)
// call the same functions, so what is fuzzed is what runs; only the socket I/O is theirs.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "sluice/http/chunked.hpp"
#include "sluice/http/head.hpp"
#include "sluice/http/message.hpp"
#include "sluice/http/strict.hpp"

namespace sluice::http {

// The empty lines before a request line are dropped (RFC 9112 §2.2: at least one must be
// ignored), then the head is scanned from its request line.
struct HeadStep {
  std::size_t skipped = 0;  // bytes of empty lines to consume first
  HeadScan scan;            // over the bytes after them
};
HeadStep next_head(std::string_view buffered, std::size_t max_header_bytes,
                   std::size_t max_uri_bytes) noexcept;
// The bytes of the CRLF pairs at the start of `buffered` (next_head's `skipped`).
std::size_t empty_lines_before(std::string_view buffered) noexcept;

// handle_request()'s refusals of a parsed head, in its order: 413 for a declared body over
// `max_body_bytes` (0: unlimited), 501 for CONNECT (a tunnel, RFC 9110 §9.3.6, which a reverse
// proxy does not offer), 400 for a malformed absolute-form target. An absolute-form target's
// authority replaces Host (RFC 9112 §3.2.2), so that routing and the origin agree on it.
Rejection admit_request(RequestParser& parser, std::uint64_t max_body_bytes);

// forward()'s view of an admitted request before rewriting. Expect is consumed here: 100-continue
// is answered hop by hop when the body is first read.
struct ForwardShape {
  bool expect_continue = false;  // the client waits for 100 Continue before sending its body
  bool chunked = false;          // the body is chunked
  bool upgrade = false;          // forwarded with its Upgrade (rewrite_request's `upgrade`)
};
ForwardShape shape_forward(RequestParser& parser, bool request_done);

// One pass of decode_chunked() over the client bytes buffered so far: decodes into
// relay[have, relay.size()), adds the decoded bytes to `bytes_in` and bounds them by
// `max_body_bytes` (0: unlimited). With `flush`, stops (some) once the buffered bytes are used up
// at a chunk boundary, so that each chunk leaves only after its data and CRLF were validated (a
// chunk larger than the relay leaves in relay-sized pieces).
struct ChunkedFeed {
  enum class Outcome : std::uint8_t {
    more,       // every buffered byte used: read more from the client
    some,       // relay full, or flushed at a boundary: send relay[0, have)
    done,       // the body (and its trailer section) ended
    invalid,    // answer status_for(violation): nothing from this byte on may be sent
    too_large,  // answer 413
  };
  Outcome outcome = Outcome::more;
  std::size_t consumed = 0;  // buffered bytes used (consume them)
  Violation violation = Violation::none;
};
ChunkedFeed feed_chunked(ChunkedDecoder& decoder, std::string_view buffered, std::span<char> relay,
                         std::size_t& have, std::uint64_t& bytes_in, std::uint64_t max_body_bytes,
                         bool flush) noexcept;

}  // namespace sluice::http
