#pragma once
// The body relay's steps, shared by both directions (the request body towards the origin in
// stream_request_body(), request_relay.hpp, and the client side's reads of it; the response body
// towards the client in relay_response(), response_relay.hpp):
//  - pending_piece(), read_piece(): the next piece of a Content-Length or read-to-close body
//    (RFC 9112 §6.3): bytes already buffered behind the head first, else one read of at most the
//    relay buffer;
//  - write_rest(): what a non-blocking write left of its buffers, with Asio's async_write;
//  - FramedPiece: what one write sends, [head] [chunk-size line] [piece] [CRLF] [last-chunk]
//    (RFC 9112 §7.1), so that a body is re-chunked as it passes and the head leaves with its
//    first piece in the same write.
//  - read_chunked_piece(): the next piece of a chunked body, decoded by http::ChunkedDecoder
//    (the one decoder of both directions) and validated before any of it is forwarded.
//
// Templates on the stream type, so that beast::test::stream drives them in tests. Stateless:
// the caller owns the buffers, the deadlines (`arm_read`, taken by value: it lives in the
// coroutine's frame, so a caller may return the awaitable) and what the bytes count for.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/system/error_code.hpp>

#include "sluice/http/chunked.hpp"
#include "sluice/http/head.hpp"
#include "sluice/http/intake.hpp"

namespace sluice::proxy {

struct BodyPiece {
  boost::system::error_code ec;  // of the read (none when the piece was buffered)
  std::string_view bytes;
  bool buffered = false;  // taken from `pending`: consume it there once it is written
  bool malformed = false;  // a chunked body's framing is invalid: nothing from there on may go
};

// Bytes asked of the peer per read of a chunked body (decoded from `pending`).
inline constexpr std::size_t chunked_read_chunk = 16 * 1024;

// What of a body with `left` bytes to go (or, `until_close`, up to the peer's EOF) is already
// buffered in `pending` (behind the head): not consumed; empty when nothing is. A plain function,
// so that the common case (a small body that came with its head) costs no coroutine.
template <class Buffer>
std::string_view pending_piece(const Buffer& pending, std::uint64_t left, bool until_close) noexcept {
  const std::string_view bytes(static_cast<const char*>(pending.data().data()), pending.size());
  return until_close ? bytes : bytes.substr(0, static_cast<std::size_t>(std::min<std::uint64_t>(bytes.size(), left)));
}

// Body pieces a relay may read now (read_now below) before it goes through the scheduler
// again: 256 KiB of 64 KiB pieces, about 0.1 ms of a worker, so that a long body that keeps
// coming cannot hold the worker from every other connection.
inline constexpr unsigned max_pieces_read_now = 4;

// Whether the next read may be tried at once, counting the pieces since the last pass through
// the scheduler (`count`, the relay's).
inline bool read_now(unsigned& count) noexcept {
  if (count < max_pieces_read_now) {
    ++count;
    return true;
  }
  count = 0;
  return false;
}

// The next piece of such a body: what `pending` holds first (pending_piece), else one read into
// `relay`, after `arm_read()` set the read's deadline. `try_first`: a non-blocking read first
// (a plain socket's try_read_some, tls/stream.hpp), and the piece at once when it found bytes.
// A body that came in more than one segment is then relayed without a trip through the
// scheduler's queue per piece: behind every other connection's ready work, each such trip made
// a 64 KiB answer wait one full turn of the worker's loop per read under load.
template <class Stream, class Buffer, class ArmRead>
boost::asio::awaitable<BodyPiece> read_piece(Stream& from, const Buffer& pending,
                                             std::span<char> relay, std::uint64_t left,
                                             bool until_close, ArmRead arm_read,
                                             bool try_first = false) {
  if (pending.size() > 0) co_return BodyPiece{{}, pending_piece(pending, left, until_close), true};
  const auto want = until_close ? relay.size()
                                : static_cast<std::size_t>(std::min<std::uint64_t>(relay.size(), left));
  if constexpr (requires { from.try_read_some(boost::asio::mutable_buffer()); }) {
    if (try_first) {
      if (const auto n = from.try_read_some(boost::asio::buffer(relay.data(), want)); n > 0)
        co_return BodyPiece{{}, {relay.data(), n}, false};
    }
  }
  arm_read();
  auto [ec, n] = co_await from.async_read_some(boost::asio::buffer(relay.data(), want),
                                               boost::asio::as_tuple(boost::asio::use_awaitable));
  co_return BodyPiece{ec, {relay.data(), n}, false};
}

// The next piece of a chunked body: decoded from what `pending` holds into `relay`, reading more
// into `pending` (after `arm_read()`) while the buffered bytes end before a chunk boundary. A
// piece ends at a chunk boundary once the buffered bytes are used up, when `relay` is full, or
// with the body (`decoder.done()`; bytes after its trailer section stay in `pending`). Decoded
// data whose chunk's CRLF has not come yet stays in `relay` until it has: a failed read drops it.
// `try_first` as for read_piece(), for the first read.
template <class Stream, class Buffer, class ArmRead>
boost::asio::awaitable<BodyPiece> read_chunked_piece(Stream& from, Buffer& pending,
                                                     http::ChunkedDecoder& decoder,
                                                     std::span<char> relay, ArmRead arm_read,
                                                     bool try_first = false) {
  std::size_t have = 0;
  std::uint64_t decoded = 0;
  for (;;) {
    const std::string_view bytes(static_cast<const char*>(pending.data().data()), pending.size());
    const auto f = http::feed_chunked(decoder, bytes, relay, have, decoded, 0, true);
    pending.consume(f.consumed);
    using Outcome = http::ChunkedFeed::Outcome;
    if (f.outcome == Outcome::invalid) co_return BodyPiece{{}, {}, false, true};
    if (f.outcome != Outcome::more) co_return BodyPiece{{}, {relay.data(), have}, false};
    const auto room = pending.max_size() - pending.size();
    if constexpr (requires { from.try_read_some(boost::asio::mutable_buffer()); }) {
      if (std::exchange(try_first, false)) {
        if (const auto n = from.try_read_some(pending.prepare(std::min(room, chunked_read_chunk))); n > 0) {
          pending.commit(n);
          continue;
        }
      }
    }
    arm_read();
    auto [ec, n] = co_await from.async_read_some(pending.prepare(std::min(room, chunked_read_chunk)),
                                                 boost::asio::as_tuple(boost::asio::use_awaitable));
    pending.commit(n);
    if (ec) co_return BodyPiece{ec, {}, false};
  }
}

// What a non-blocking write (tls::Stream::try_write) left of `buffers` (past the first `skip`
// bytes), with Asio's async_write; returns the error and the bytes of `buffers` written in all. A
// coroutine of its own, so that its state is in the rare frame that needs it, not in the hot ones.
template <class Stream, class Buffers>
boost::asio::awaitable<std::tuple<boost::system::error_code, std::size_t>> write_rest(Stream& stream,
                                                                                     Buffers buffers,
                                                                                     std::size_t skip) {
  boost::beast::buffers_suffix<Buffers> rest(buffers);
  rest.consume(skip);
  auto [ec, n] = co_await boost::asio::async_write(stream, rest,
                                                   boost::asio::as_tuple(boost::asio::use_awaitable));
  co_return std::tuple(ec, skip + n);
}

// One write's buffers. Not copyable: the buffers point into its own chunk-size line.
class FramedPiece {
public:
  // `head`: empty once the head was written; `chunked`: re-chunk the piece; `last`: the body
  // ends with this piece (a chunked one then gets its last-chunk).
  FramedPiece(std::string_view head, std::string_view piece, bool chunked, bool last) noexcept;
  FramedPiece(const FramedPiece&) = delete;
  FramedPiece& operator=(const FramedPiece&) = delete;

  std::span<const boost::asio::const_buffer> buffers() const noexcept { return {out_.data(), count_}; }

private:
  http::ChunkHeader chunk_;
  std::array<boost::asio::const_buffer, 5> out_;
  std::size_t count_ = 0;
};

}  // namespace sluice::proxy
