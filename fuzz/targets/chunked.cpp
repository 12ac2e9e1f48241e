// (d) chunked_body: the chunked request body relay (DownstreamSession::decode_chunked): ChunkedDecoder
// validates and decodes, we re-chunk each decoded piece. Whatever the bytes, decoding them all
// at once and as they trickle in (one byte per read, a small relay buffer) must agree, and the
// re-chunked body must decode to the same bytes and end exactly where it ends.
#include <string>

#include "sluice/http/chunked.hpp"
#include "sluice/http/head.hpp"
#include "targets/util.hpp"

namespace sluice::fuzz {

namespace {

struct Decoded {
  enum class End { complete, incomplete, invalid } end = End::incomplete;
  std::string body;
  std::string rechunked;  // what the relay sends on
  std::size_t consumed = 0;
};

// Decodes `bytes` as the session does: into a relay buffer of `relay` bytes, with at most
// `step` bytes of input available per read (what one read from the socket brought).
Decoded decode(std::string_view bytes, std::size_t relay, std::size_t step) {
  Decoded out;
  http::ChunkedDecoder decoder;
  std::string buf(relay, '\0');
  std::size_t available = std::min(step, bytes.size());
  for (;;) {
    const auto s = decoder.feed(bytes.substr(out.consumed, available - out.consumed), buf);
    out.consumed += s.consumed;
    const std::string_view piece(buf.data(), s.produced);
    out.body.append(piece);
    if (!piece.empty()) {
      out.rechunked.append(http::ChunkHeader(piece.size()).view());
      out.rechunked.append(piece);
      out.rechunked.append("\r\n");
    }
    if (s.status == http::ChunkedDecoder::Status::invalid) {
      out.end = Decoded::End::invalid;
      check(s.violation != http::Violation::none, "invalid without a violation");
      return out;
    }
    if (s.status == http::ChunkedDecoder::Status::done) break;
    if (out.consumed == available) {
      if (available == bytes.size()) return out;  // incomplete: the client stopped here
      available = std::min(bytes.size(), available + step);  // the next read
    }
  }
  out.rechunked.append(http::last_chunk);
  out.end = Decoded::End::complete;
  return out;
}

}  // namespace

void chunked_body(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto whole = decode(bytes, 64 * 1024, bytes.size());
  const auto trickle = decode(bytes, 7, 1);
  check(whole.end == trickle.end, "one read and byte-by-byte reads disagree on the end");
  if (whole.end == Decoded::End::invalid) return;
  check(whole.body.starts_with(trickle.body) || trickle.body.starts_with(whole.body),
        "one read and byte-by-byte reads decode different bytes");
  if (whole.end != Decoded::End::complete) return;
  check(whole.body == trickle.body, "one read and byte-by-byte reads decode different bodies");
  check(whole.consumed == trickle.consumed, "one read and byte-by-byte reads end elsewhere");

  // The origin's view of what we relay.
  const auto again = decode(whole.rechunked, 64 * 1024, whole.rechunked.size());
  check(again.end == Decoded::End::complete, "re-chunked body does not decode");
  check(again.body == whole.body, "re-chunked body decodes to other bytes");
  check(again.consumed == whole.rechunked.size(), "re-chunked body ends early");
}

}  // namespace sluice::fuzz
