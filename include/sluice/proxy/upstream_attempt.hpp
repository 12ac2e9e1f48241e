#pragma once
// The response-head phase of an upstream attempt (issue 17: UpstreamAttempt, one try on one
// server). After the request went out, read_final_head() reads from the origin until a final
// response head is indexed, passing interim 1xx heads to the session as they come, and returns
// the attempt's outcome: FailureKind::none (a final head is in `hooks.index()`, its bytes consumed
// from `in` but still in place until the next read), or what ended the try.
//
// Templated on the stream, so that beast::test::stream and a fail-count loop drive it in unit
// tests (tests/proxy/upstream_attempt_test.cpp); the session instantiates it for tls::Stream.
// What belongs to the session (where the head index lives, deadlines, the client side of a 1xx,
// the counters) comes through `hooks`:
//   http::ResponseHead& index();                 // the index to fill, reused across 1xx heads
//   std::optional<FailureKind> complete(head);   // a complete head: its outcome if final,
//                                                //   nullopt for an interim one
//   net::awaitable<bool> interim(head);           // pass an interim head on; false: client gone
//   void received(std::size_t n);                // n bytes came from the origin (n may be 0)
//   bool client_gone();                          // an upload's client side failed meanwhile
//   error_code timed(error_code);                // a deadline's cancellation as beast timeout
// `hooks` comes first, by value (it lives in the coroutine's frame, so a caller may return the
// awaitable), and a class of hooks can take its frames from the worker's FramePool
// (SLUICE_POOLED_COROUTINES_TAKING, core/pooled_frame.hpp).
#include <algorithm>
#include <cstddef>
#include <string_view>
#include <tuple>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>

#include "sluice/http/head_index.hpp"
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
    const auto buffer = in.prepare(std::min(in.max_size() - in.size(), head_read_chunk));
    // On a stream with try_read_some (tls::Stream) the read is tried first, and a plain
    // connection waits for readability before trying again: on a pooled connection the pool
    // proved drained neither costs a system call (tls/edge_io.hpp), and a short read after the
    // wait proves it drained for its next checkout. TLS, EOF, errors and other streams take an
    // ordinary async_read_some.
    boost::system::error_code ec;
    std::size_t n = 0;
    if constexpr (requires { upstream.try_read_some(buffer); }) {
      n = upstream.try_read_some(buffer);
      if (n == 0 && !upstream.is_tls()) {
        std::tie(ec) = co_await upstream.async_wait_readable(nothrow);
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

}  // namespace sluice::proxy
