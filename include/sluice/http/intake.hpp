#pragma once
// What the session decides about a client's request from the bytes already read, as pure
// functions: where the next head starts (the empty lines before it skipped) and one decoding pass
// over a chunked body (feed_chunked()). DownstreamSession and the fuzz targets (fuzz/targets/)
// call the same functions, so what is fuzzed is what runs; only the socket I/O is the session's.
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
