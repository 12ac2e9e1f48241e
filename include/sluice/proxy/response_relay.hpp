#pragma once
// The response relay: after an attempt's final head,
// the rewritten head and the origin's body go to the client, relay_response(hooks, upstream, in,
// client, framing, head, relay, chunked; `chunked`: a fresh decoder for a chunked body, with the
// session's limits). Templated on both streams, so that beast::test::stream
// and a fail-count loop drive it in unit tests (tests/proxy/response_relay_test.cpp); the
// session instantiates it for tls::Stream and provides, through a hooks value (first and by
// value: it lives in the coroutine's frame, and its class can take the frames from the worker's
// FramePool, SLUICE_POOLED_COROUTINES_TAKING):
//   void reading();              // an origin read follows: arm its deadline
//   void writing();              // a client write follows: arm its deadline
//   error_code timed(error_code);  // a deadline's cancellation as beast timeout
//   void sent(std::string_view piece);  // a piece of the body reached the client (maybe empty)
//   void head_reached();         // a byte of the head reached the client (it is no longer ours)
//   awaitable<void> refused();   // the framing cannot be relayed: answer 502 bad response
//   awaitable<void> body_failed(error_code, bool head_written, FailureKind);
//                                // the origin's body failed (bad_response or reset_after_send)
//   void client_failed(error_code);  // a client write failed (beast timeout: its deadline passed)
//   bool client_has_room(std::size_t n);  // the client takes n more bytes without holding them
//                                         // unsent past its bound (client_unsent_max)
//   awaitable<void> wait_client_room(std::span<char>& relay, error_code&);
//                                // waits until it does, and may put `relay` in another block
//                                // (relay_compressed() passes its `coded` span too)
//   void done();                 // the body reached the client whole
// Returns whether the upstream connection may go back to the pool: only after a whole, correctly
// framed body with nothing left over in `in`, and when `framing.reusable`.
//
// The body's framing (RFC 9112 §6.3): Content-Length (what `in` holds behind the head first), read
// to the origin's close, or chunked, decoded by the same http::ChunkedDecoder as a request's
// (read_chunked_piece(), body_relay.hpp): each piece leaves once the buffered bytes are decoded at
// a chunk boundary, so a chunk's data goes out only after its CRLF was validated (a chunk larger
// than the relay buffer goes in relay-sized pieces), and a malformed chunk is a bad response. It
// goes out as it came, or re-chunked (FramedPiece) when the origin's framing cannot reach the
// client as it is. The head leaves with the first piece; a whole small body is appended to it
// (coalesced_answer_max), so a small answer is one write.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>

#include "sluice/http/chunked.hpp"
#include "sluice/http/head.hpp"
#include "sluice/proxy/body_relay.hpp"
#include "sluice/proxy/failure.hpp"

namespace sluice::proxy {

// A whole body up to this size (with its head) goes out appended to the head: one send(). Within
// the 4 KiB string the worker's StringPool keeps (worker_context.hpp): a head string that grows
// to hold one at most doubles within it, so it still goes back to the pool.
inline constexpr std::size_t coalesced_answer_max = 2048;

// What the session decided of a final response before its relay.
struct ResponseFraming {
  http::ResponsePlan plan;
  std::uint64_t content_length = 0;  // the body's, when it has one (neither chunked nor to the close)
  bool reusable = false;             // the origin keeps the connection open, and had the whole request
};

namespace detail {

// A whole small body goes out appended to the head (one buffer, one send(): tls/stream.hpp).
inline std::string_view joined_to_head(std::string& head, std::string_view piece, bool whole) {
  if (!whole || piece.empty() || head.size() + piece.size() > coalesced_answer_max) return piece;
  head.append(piece);
  return {};
}

// The next piece of the body, and whether it is the last (`content_left` counted down).
template <class Hooks, class Stream, class Buffer>
boost::asio::awaitable<BodyPiece> next_response_piece(Hooks& hooks, Stream& upstream, Buffer& in,
                                                      const http::ResponsePlan& plan,
                                                      std::uint64_t content_left,
                                                      std::span<char> relay,
                                                      http::ChunkedDecoder& chunked, bool try_first) {
  if (plan.chunked_in)
    return read_chunked_piece(upstream, in, chunked, relay, [&hooks] { hooks.reading(); }, try_first);
  return read_piece(upstream, in, relay, content_left, plan.until_close, [&hooks] { hooks.reading(); },
                    try_first);
}

// Where a response body stands between reads: what is left of a Content-Length, whether its end
// was seen (relay_response() and relay_compressed(), compressed_relay.hpp).
struct BodyCursor {
  BodyCursor(const http::ResponsePlan& plan, std::uint64_t content_length) noexcept
      : chunked_in(plan.chunked_in),
        until_close(plan.until_close && !plan.chunked_in),
        done(!plan.body_expected || (!plan.chunked_in && !until_close && content_length == 0)),
        content_left(content_length) {}

  // The body behind the head comes first, with no read (and no coroutine of its own).
  template <class Buffer>
  bool buffered(const Buffer& in) const noexcept {
    return !chunked_in && in.size() > 0;
  }
  template <class Buffer>
  BodyPiece take_buffered(const Buffer& in) const noexcept {
    return BodyPiece{{}, pending_piece(in, content_left, until_close), true};
  }
  // The most the next read may bring: a relay's worth, or what is left of a Content-Length.
  std::size_t want(std::size_t relay) const noexcept {
    return chunked_in || until_close ? relay : static_cast<std::size_t>(std::min<std::uint64_t>(relay, content_left));
  }
  // After a piece was read (`ec`: its error after hooks.timed()): the failure that ends the body,
  // else none, with `done` and what is left updated.
  FailureKind advance(const BodyPiece& read, boost::system::error_code ec,
                      const http::ChunkedDecoder& chunked) noexcept {
    if (ec == boost::asio::error::eof && until_close) {
      done = true;
    } else if (ec || read.malformed) {
      return read.malformed ? FailureKind::bad_response : FailureKind::reset_after_send;
    }
    if (chunked_in) {
      done = chunked.done();
    } else if (!until_close) {
      content_left -= read.bytes.size();
      done = content_left == 0;
    }
    return FailureKind::none;
  }

  bool chunked_in;
  bool until_close;
  bool done;
  std::uint64_t content_left;
  unsigned pieces_read_now = 0;
};

// Whether the next piece must wait for the client's room first (relay_response()): not a piece
// that came with the head (it is read already), and not right after such a wait (the next piece
// is then read without asking again: a client that failed meanwhile is told by the write).
template <class Hooks, class Buffer>
bool must_wait_for_room(Hooks& hooks, const BodyCursor& body, const Buffer& in, std::size_t relay,
                        bool& waited) {
  if (body.buffered(in) || std::exchange(waited, false)) return false;
  return !hooks.client_has_room(body.want(relay));
}

// That wait (hooks.wait_client_room, which may put `blocks` in another relay block). False: the
// client failed (hooks.client_failed was called). A coroutine of its own: only a slow client
// pays for its frame.
template <class Hooks, class... Blocks>
boost::asio::awaitable<bool> wait_for_room(Hooks hooks, bool& waited, Blocks&... blocks) {
  boost::system::error_code ec;
  co_await hooks.wait_client_room(blocks..., ec);
  if (const auto failed = hooks.timed(ec)) {
    hooks.client_failed(failed);
    co_return false;
  }
  waited = true;
  co_return true;
}

}  // namespace detail

template <class Hooks, class Upstream, class Buffer, class Client>
boost::asio::awaitable<bool> relay_response(Hooks hooks, Upstream& upstream, Buffer& in,
                                            Client& client, ResponseFraming framing,
                                            std::string& head, std::span<char> relay,
                                            http::ChunkedDecoder& chunked) {
  const auto& plan = framing.plan;
  if (plan.refuse) {
    co_await hooks.refused();
    co_return false;
  }
  detail::BodyCursor body(plan, framing.content_length);
  bool& done = body.done;
  bool head_written = false;
  bool waited = false;  // for the client's room
  while (!done || !head_written) {
    std::string_view piece;
    BodyPiece read;
    if (!done) {
      // Read from the origin only what the client takes now: a slow reader's answer waits in the
      // origin's socket, and the wait for it holds no relay block.
      if (detail::must_wait_for_room(hooks, body, in, relay.size(), waited)) {
        if (!co_await detail::wait_for_room(hooks, waited, relay)) co_return false;
        continue;
      }
      read = body.buffered(in) ? body.take_buffered(in)
                               : co_await detail::next_response_piece(hooks, upstream, in, plan, body.content_left,
                                                                      relay, chunked, read_now(body.pieces_read_now));
      const auto ec = hooks.timed(read.ec);
      if (const auto failed = body.advance(read, ec, chunked); failed != FailureKind::none) {
        co_await hooks.body_failed(ec, head_written, failed);
        co_return false;
      }
      piece = read.bytes;
      if (piece.empty() && !done) continue;
    }
    const FramedPiece out(head_written ? std::string_view() : head,
                          head_written ? piece : detail::joined_to_head(head, piece, done && !plan.chunked_out),
                          plan.chunked_out, done);
    hooks.writing();
    std::size_t n = 0;
    if constexpr (requires { client.try_write(out.buffers()); }) n = client.try_write(out.buffers());
    boost::system::error_code ec;
    if (n < boost::asio::buffer_size(out.buffers())) std::tie(ec, n) = co_await write_rest(client, out.buffers(), n);
    if (n > 0) hooks.head_reached();
    if (const auto failed = hooks.timed(ec)) {
      hooks.client_failed(failed);
      co_return false;
    }
    head_written = true;
    hooks.sent(piece);
    if (read.buffered) in.consume(piece.size());
  }
  hooks.done();
  co_return framing.reusable && !plan.until_close && in.size() == 0;
}

// relay_response()'s common case with no coroutine, for a client stream with try_write
// (tls::Stream): an answer with no body, or with a Content-Length body that came whole behind its
// head and fits with it in one write (coalesced_answer_max), goes in one non-blocking write, the
// hooks called as relay_response() calls them (writing, head_reached, sent, done).
//   relayed: all of it went (`reusable` as relay_response() returns it);
//   not_tried: nothing went (another framing, a body still to come, or the client took no byte:
//     TLS, or a full socket), `head` as it was: relay_response() does it all;
//   partly: the client took `written` bytes of it: finish_at_once() writes the rest.
enum class AtOnce { relayed, not_tried, partly };
struct AtOnceResult {
  AtOnce state = AtOnce::not_tried;
  bool reusable = false;
  std::size_t written = 0;
};

template <class Hooks, class Buffer, class Client>
AtOnceResult relay_at_once(Hooks& hooks, Buffer& in, Client& client, const ResponseFraming& framing,
                           std::string& head) {
  const auto& plan = framing.plan;
  if (plan.refuse || plan.chunked_in || plan.chunked_out || plan.until_close) return {};
  const std::uint64_t body = plan.body_expected ? framing.content_length : 0;
  if (in.size() < body || head.size() + body > coalesced_answer_max) return {};
  if constexpr (requires { client.try_write(boost::asio::const_buffer()); }) {
    // A client that takes no byte at once (TLS) is not tried: no body joined to the head only to
    // be cut off again (relay_response() joins it once).
    if constexpr (requires { client.writes_at_once(); })
      if (!client.writes_at_once()) return {};
    const auto head_size = head.size();
    const std::string_view piece(static_cast<const char*>(in.data().data()), static_cast<std::size_t>(body));
    head.append(piece);
    hooks.writing();
    const std::size_t n = client.try_write(boost::asio::buffer(head));
    if (n == 0) {
      head.resize(head_size);
      return {};
    }
    hooks.head_reached();
    if (n < head.size()) return {AtOnce::partly, false, n};
    hooks.sent(piece);
    in.consume(piece.size());
    hooks.done();
    return {AtOnce::relayed, framing.reusable && in.size() == 0, n};
  } else {
    return {};
  }
}

// The rest of what relay_at_once() left partly written (`head`, the body appended to it, of which
// the client took `written` bytes); returns as relay_response() does.
template <class Hooks, class Buffer, class Client>
boost::asio::awaitable<bool> finish_at_once(Hooks hooks, Buffer& in, Client& client, ResponseFraming framing,
                                            std::string& head, std::size_t written) {
  const std::uint64_t body = framing.plan.body_expected ? framing.content_length : 0;
  const std::string_view piece(static_cast<const char*>(in.data().data()), static_cast<std::size_t>(body));
  const std::array<boost::asio::const_buffer, 1> out{boost::asio::buffer(head)};
  auto [ec, n] = co_await write_rest(client, std::span<const boost::asio::const_buffer>(out), written);
  if (const auto failed = hooks.timed(ec)) {
    hooks.client_failed(failed);
    co_return false;
  }
  hooks.sent(piece);
  in.consume(piece.size());
  hooks.done();
  co_return framing.reusable && in.size() == 0;
}

}  // namespace sluice::proxy
