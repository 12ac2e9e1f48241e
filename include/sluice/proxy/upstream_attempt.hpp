#pragma once
// An upstream attempt (one try on one server), in three templates on
// the stream type, so that beast::test::stream and a fail-count loop drive them in unit tests
// (tests/proxy/upstream_attempt_test.cpp); the session instantiates them for tls::Stream, and
// what belongs to it comes through a hooks value, first and by value (it lives in the
// coroutine's frame, so a caller may return the awaitable; a class of hooks can take its frames
// from the worker's FramePool, SLUICE_POOLED_COROUTINES_TAKING, core/pooled_frame.hpp):
//
// attempt_server(hooks, upstream): the try. `upstream` (a std::optional<Stream>, or the session's
// tls::StreamSlot) holds a pooled connection, or nothing for a new one. Returns the try's Failure, built here where its I/O failed: answered (kind none,
// the final head's status) with the connection left in `upstream`, or what ended the try with
// `upstream` empty. A pooled connection the origin had closed while idle
// (health::stale_connection: it failed before any response byte) is not the server's fault: the
// request goes once more on a new connection, when the hooks say resending cannot duplicate work.
//   awaitable<Failure> connect(Slot&);         // a new connection in it, or why not
//   void ready(Stream&);                      // the connection the request goes on
//   awaitable<FailureKind> send(Stream&, std::uint64_t& sent, std::size_t& received);
//                                             // the request, then the final head (send_whole())
//   unsigned status();                        // the final head's
//   void forget();                            // what a failed send left (buffers, head)
//   bool resend_on_new_connection();          // asked of a stale pooled connection
//
// send_whole(hooks, upstream, out, in, max_header_bytes, sent): a request in one piece (its head,
// and its body when kept whole) written, then its final head read (read_final_head()). A write
// that fails before its first byte left is reset_before_send: the origin cannot have the request.
// Its hooks are read_final_head()'s, and `void arm_response()` (the head's deadline, once the
// request is out).
//
// read_final_head(hooks, upstream, in, max_header_bytes): after the request went out, reads from
// the origin until a final response head is indexed, passing interim 1xx heads to the session as
// they come, and returns the attempt's outcome: FailureKind::none (a final head is in
// `hooks.index()`, its bytes consumed from `in` but still in place until the next read), or what
// ended the try.
//   http::ResponseHead& index();                 // the index to fill, reused across 1xx heads
//   std::optional<FailureKind> complete(head);   // a complete head: its outcome if final,
//                                                //   nullopt for an interim one
//   net::awaitable<bool> interim(head);           // pass an interim head on; false: client gone
//   void received(std::size_t n);                // n bytes came from the origin (n may be 0)
//   bool client_gone();                          // an upload's client side failed meanwhile
//   error_code timed(error_code);                // a deadline's cancellation as beast timeout
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>

#include "sluice/http/head_index.hpp"
#include "sluice/proxy/body_relay.hpp"
#include "sluice/proxy/failure.hpp"

namespace sluice::proxy {

// Bytes asked of the origin per read while its head is incomplete.
inline constexpr std::size_t head_read_chunk = 16 * 1024;

template <class Hooks, class Stream, class Buffer>
boost::asio::awaitable<FailureKind> read_final_head(Hooks hooks, Stream& upstream, Buffer& in,
                                                    std::size_t max_header_bytes) {
  namespace net = boost::asio;
  constexpr auto nothrow = net::as_tuple(net::use_awaitable);
  for (;;) {
    if (in.size() != 0) {  // usually empty at first: the answer is still on its way
      auto& head = hooks.index();
      const std::string_view bytes(static_cast<const char*>(in.data().data()), in.size());
      const auto verdict = http::index_response_head(bytes, max_header_bytes, head);
      if (verdict.result == http::HeadScan::Result::invalid) co_return FailureKind::bad_response;
      if (verdict.result == http::HeadScan::Result::complete) {
        in.consume(verdict.head_size);  // the bytes stay in place until the next read
        if (const auto final = hooks.complete(head)) co_return *final;
        if (!co_await hooks.interim(head)) co_return FailureKind::client_failed;
        continue;
      }
    }
    // On a stream with try_read_some (tls::Stream) the read is tried first, and a plain
    // connection waits for readability before trying again: on a pooled connection the pool
    // proved drained neither costs a system call (tls/edge_io.hpp), and a short read after the
    // wait proves it drained for its next checkout. A plain connection with no storage for the
    // head yet (a session's first answer) waits before it takes any: an origin that has not
    // answered (a request body still trickling in) costs no head buffer. TLS, EOF, errors and
    // other streams take an ordinary async_read_some.
    boost::system::error_code ec;
    std::size_t n = 0;
    bool waited = false;
    if constexpr (requires { upstream.readable(ec); in.capacity(); }) {
      if (in.capacity() == 0 && !upstream.is_tls()) {
        co_await upstream.readable(ec);
        waited = true;
      }
    }
    const auto buffer = in.prepare(std::min(in.max_size() - in.size(), head_read_chunk));
    if constexpr (requires { upstream.try_read_some(buffer); }) {
      if (!ec) n = upstream.try_read_some(buffer);
      if (n == 0 && !ec && !waited && !upstream.is_tls()) {
        co_await upstream.readable(ec);
        if (!ec) n = upstream.try_read_some(buffer);
      }
    }
    if (n == 0 && !ec) std::tie(ec, n) = co_await upstream.async_read_some(buffer, nothrow);
    ec = hooks.timed(ec);
    in.commit(n);
    hooks.received(n);
    if (hooks.client_gone()) co_return FailureKind::client_failed;
    if (ec) {
      // The request was (at least partly) written: whatever happens now, the origin may have it.
      co_return ec == boost::beast::error::timeout ? FailureKind::response_timeout
                                                   : FailureKind::reset_after_send;
    }
  }
}


namespace detail {

// send_whole() once a non-blocking write left part of the request (or the stream has none).
template <class Hooks, class Stream, class Buffers, class Buffer>
boost::asio::awaitable<FailureKind> send_rest(Hooks hooks, Stream& upstream, Buffers out, Buffer& in,
                                              std::size_t max_header_bytes, std::uint64_t& sent,
                                              std::size_t written) {
  boost::system::error_code ec;
  std::tie(ec, written) = co_await write_rest(upstream, out, written);
  sent = written;
  if (hooks.timed(ec)) co_return written == 0 ? FailureKind::reset_before_send : FailureKind::reset_after_send;
  hooks.arm_response();
  co_return co_await read_final_head(std::move(hooks), upstream, in, max_header_bytes);
}

}  // namespace detail

// Not a coroutine: on a stream with try_write (tls::Stream) the request usually goes at once,
// with no reactor operation, and what is awaited is read_final_head() itself, with no frame of
// send_whole's around it (one frame fewer per request: ~150 instructions). The write is tried when
// send_whole() is called, which is where it is awaited.
template <class Hooks, class Stream, class Buffers, class Buffer>
boost::asio::awaitable<FailureKind> send_whole(Hooks hooks, Stream& upstream, Buffers out, Buffer& in,
                                               std::size_t max_header_bytes, std::uint64_t& sent) {
  std::size_t written = 0;
  if constexpr (requires { upstream.try_write(out); }) written = upstream.try_write(out);
  if (written < boost::asio::buffer_size(out))
    return detail::send_rest(std::move(hooks), upstream, out, in, max_header_bytes, sent, written);
  sent = written;
  hooks.arm_response();
  return read_final_head(std::move(hooks), upstream, in, max_header_bytes);
}

template <class Hooks, class Slot>
boost::asio::awaitable<Failure> attempt_server(Hooks hooks, Slot& upstream) {
  bool reused = upstream.has_value();
  for (;;) {
    if (!upstream) {
      const auto failure = co_await hooks.connect(upstream);
      if (failure.failed()) co_return failure;
    }
    hooks.ready(*upstream);
    std::uint64_t sent = 0;
    std::size_t received = 0;
    const auto kind = co_await hooks.send(*upstream, sent, received);
    if (kind == FailureKind::none) co_return Failure::answered(hooks.status());
    auto failure = Failure::of(kind);
    failure.request_bytes_sent = sent > 0;
    failure.reused_connection = reused;
    failure.response_bytes_received = received > 0;
    hooks.forget();
    upstream.reset();
    if (!health::stale_connection(failure) || !hooks.resend_on_new_connection()) co_return failure;
    reused = false;
  }
}

}  // namespace sluice::proxy
