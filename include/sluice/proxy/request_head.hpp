#pragma once
// The request-head phase of the client side: waits for a
// client's next request head and reads it until the session's look at the buffered bytes decides
// (a complete head, a violation), or the connection ends (end of stream, reset, the idle or
// header timeout, parking, shutdown).
//
// Templated on the stream, so that beast::test::stream and a fail-count loop drive it in unit
// tests (tests/proxy/request_head_test.cpp); the session instantiates it for tls::Stream, where a
// plain connection is read with non-blocking tries and waits for readability (tls/edge_io.hpp):
// an idle keep-alive connection then holds no buffer while it waits, and the wait is what parking
// turns into a parked connection. Other streams take an ordinary async_read_some.
//
// What belongs to the session comes through `hooks`, first and by value (a class of hooks can
// take its frames from the worker's FramePool, SLUICE_POOLED_COROUTINES_TAKING):
//   std::optional<HeadResult> look();       // the bytes buffered: a decision, or nullopt for more
//                                           //   (error: the session's answer is set)
//   bool idle();                            // no byte of the next request yet
//   bool stopping();                        // graceful shutdown (an idle connection just closes)
//   void waiting(bool parkable);            // a wait for readability begins, nothing buffered
//   bool woke(error_code);                  // it ended; true: expire() parked the connection
//   void busy();                            // bytes came: from now on the header timeout runs
//   error_code timed(error_code);           // a deadline's cancellation as beast timeout
//   void refuse(const ProxyError&);         // the answer to a head that ends the loop in error
//
// Hooks that also serve requests (the session's) make the phase the connection's request loop,
// in one frame for all its requests (a frame per request cost ~170 instructions): each head the
// look takes (ok) goes to
//   awaitable<bool> exchange();             // the request's exchange; true: the client may send more
//   bool exchanged(bool keep);              // after it (`keep`: exchange()'s); true: read the next
//                                           //   head (the hooks set up its deadlines and idle state)
// and the phase returns only when the connection is done: closed (also after an exchange that
// ends it), error or parked, never ok.
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <optional>
#include <tuple>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>

#include "sluice/proxy/error_response.hpp"
#include "sluice/proxy/upstream_attempt.hpp"
#include "sluice/proxy/worker_context.hpp"

namespace sluice::proxy {

// ok: a complete head (the session took it); error: answered with what hooks.refuse() or the look
// set (408, 400, 431, ...); closed, parked: nothing to answer.
// http2: the connection opened with HTTP/2's preface (h2c with prior knowledge).
enum class HeadResult { ok, closed, error, parked, http2 };

// Room to read a request head into: an empty buffer takes a small block first (most heads fit in
// 1 KiB, and a partial head should not pin more), a buffer with room fills it, a full small one
// grows to the next tier (head_grown_size: the buffer's blocks come in those sizes,
// worker_context.hpp), a full larger one by head_read_chunk; never past max_size().
template <class Buffer>
boost::asio::mutable_buffer prepare_head_read(Buffer& buffer) {
  const auto room = buffer.max_size() - buffer.size();
  const auto spare = buffer.capacity() - buffer.size();
  const auto want = buffer.capacity() == 0              ? head_block_size
                    : spare > 0                          ? spare
                    : buffer.capacity() < head_grown_size ? head_grown_size - buffer.size()
                                                         : head_read_chunk;
  return buffer.prepare(std::min(room, want));
}

template <class Hooks>
concept ServesRequests = requires(Hooks& hooks) {
  hooks.exchange();
  { hooks.exchanged(true) } -> std::same_as<bool>;
};

template <class Hooks, class Stream, class Buffer>
boost::asio::awaitable<HeadResult> read_request_head(Hooks hooks, Stream& client, Buffer& in) {
  namespace net = boost::asio;
  constexpr auto nothrow = net::as_tuple(net::use_awaitable);
  for (;;) {
    if (in.size() > 0) {
      if (auto decided = hooks.look()) {
        if constexpr (ServesRequests<Hooks>) {
          if (*decided == HeadResult::ok) {
            const bool keep = co_await hooks.exchange();
            if (!hooks.exchanged(keep)) co_return HeadResult::closed;
            continue;  // what the client sent after this request may be the next one
          }
        }
        co_return *decided;
      }
    }
    if (hooks.stopping() && hooks.idle()) co_return HeadResult::closed;
    std::size_t n = 0;
    boost::system::error_code ec;
    if constexpr (requires { client.try_read_some(net::mutable_buffer()); }) {
      // Nothing buffered: take what the kernel has, often the request already (a new connection,
      // a quick client). When it has nothing (EAGAIN, or the last request's short read on a
      // connection watched for hang-ups proves the socket drained, so neither this try nor the
      // wait below costs a system call), wait for readability. A plain keep-alive connection
      // keeps its empty buffer meanwhile: within park_after it is parked and its session, buffer
      // and all, is gone (giving the block back at every request and taking it again cost ~150
      // instructions per request). Any other waiter gives it back while it waits.
      if (hooks.idle()) client.watch_hangup();  // a keep-alive connection: once, at its second request
      if (in.size() == 0 && client.worth_a_try()) n = client.try_read_some(prepare_head_read(in));
      if (n == 0 && in.size() == 0) {
        if (!hooks.idle() || client.is_tls()) in.shrink_to_fit();
        hooks.waiting(!client.is_tls());
        boost::system::error_code wec;
        co_await client.readable(wec);
        const bool parked = hooks.woke(wec);
        // Idle timeout, close or shutdown: nothing to answer.
        if (wec) co_return parked ? HeadResult::parked : HeadResult::closed;
        n = client.try_read_some(prepare_head_read(in));  // readable: no second operation
      }
    }
    if (n == 0) {
      auto [rec, m] = co_await client.async_read_some(prepare_head_read(in), nothrow);
      ec = hooks.timed(rec);
      n = m;
    }
    in.commit(n);
    if (ec) {
      if (ec == boost::beast::error::timeout && in.size() > 0) {
        hooks.refuse({408, "header timeout"});
        co_return HeadResult::error;
      }
      co_return HeadResult::closed;  // end of stream, reset, idle timeout or shutdown
    }
    if (n > 0) hooks.busy();
  }
}

}  // namespace sluice::proxy
