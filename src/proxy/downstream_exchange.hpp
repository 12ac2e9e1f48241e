#pragma once
// What the downstream session's files share (downstream_session.cpp, downstream_forward.cpp,
// downstream_upload.cpp, downstream_response.cpp): the per-request state, DownstreamSession::Exchange,
// and a few helpers. Private to src/proxy.
#include "sluice/proxy/downstream_session.hpp"

#include <charconv>
#include <cstring>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/static_string/static_string.hpp>
#include <spdlog/spdlog.h>

#include "sluice/http/head.hpp"
#include "sluice/http/intake.hpp"
#include "sluice/http/rewrite.hpp"
#include "sluice/balancer/hash.hpp"
#include "sluice/health/log.hpp"
#include "sluice/idempotency/guard.hpp"
#include "sluice/http/strict.hpp"
#include "sluice/compress/accept_encoding.hpp"
#include "sluice/proxy/body_relay.hpp"
#include "sluice/proxy/compressed_relay.hpp"
#include "sluice/proxy/response_relay.hpp"
#include "sluice/proxy/upstream_attempt.hpp"

namespace sluice::proxy {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

inline constexpr auto nothrow = net::as_tuple(net::use_awaitable);
constexpr std::size_t relay_size = relay_block_size;
constexpr std::size_t read_chunk = head_read_chunk;  // bytes asked of the socket while reading a head
constexpr std::string_view crlf = "\r\n";
// The access log's errors for an answer that broke off after its head went to the client (the
// exchange's `cut` says whose doing it was). The origin's body broke off:
constexpr std::string_view upstream_body_cut = "upstream body cut";
// The response's encoder failed (its library could not allocate): sluice's own failure, counted
// as its own 5xx even when the origin's head already went out.
constexpr std::string_view compression_failed = "compression failed";
// The client went away (or stopped reading for idle_timeout) while an answer was on its way.
constexpr std::string_view client_closed = "client closed";
constexpr std::string_view client_write_timeout = "client write timeout";

// Room to read into `buffer` without exceeding its max_size.
template <class Buffer>
net::mutable_buffer prepare_some(Buffer& buffer) {
  const auto room = buffer.max_size() - buffer.size();
  return buffer.prepare(std::min(room, read_chunk));
}

template <class Buffer>
std::string_view view(const Buffer& b) {
  return {static_cast<const char*>(b.data().data()), b.size()};
}

}  // namespace

// Per-request state: lives on run()'s coroutine frame for the duration of one exchange. The attempt
// loop's record (forwarder.hpp) is part of it.
struct DownstreamSession::Exchange : AttemptRecord {
  Clock::time_point start;
  // The request's id: the client's own (a view into the request head's bytes, which stay in the
  // arena until the exchange ends), or one generated into generated_id.
  char generated_id[37];
  std::string_view request_id;
  // The client address (see proxy::resolve_client): a view into X-Forwarded-For (the request
  // head's arena copy, kept until the exchange ends) or into client_ip_.
  std::string_view client_ip;
  const Upstream* upstream = nullptr;
  const Router::Route* route = nullptr;  // its edge rules (docs/edge.md)
  unsigned status = 0;
  unsigned client_version = 11;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  std::string_view error;
  bool client_keep_alive = false;
  bool expect_continue = false;  // the client waits for 100 Continue before sending its body
  bool chunked_in = false;       // the request body is chunked (else Content-Length or none)
  bool head_sent = false;        // response head reached the client: no error page possible
  bool request_done = false;     // the whole request (head and body) was read from the client
  bool body_kept = false;        // the whole body is in relay_ (kept_body bytes), for replay
  bool body_consumed = false;    // streamed body bytes were taken from the client: no replay
  bool upgrade = false;          // forwarded with its Upgrade: a 101 turns it into a tunnel
  // The origin's body failed (after its head arrived): counted against the server (end_delivery()).
  FailureKind body_failure = FailureKind::none;
  // An answer whose head reached the client ended early: the origin's body broke off (counted in
  // its own status class), the client left, or sluice's encoder failed (its own 5xx).
  enum class Cut : unsigned char { none, origin, client, sluice } cut = Cut::none;
  std::size_t kept_body = 0;
  std::uint64_t content_left = 0;  // a streamed Content-Length body's bytes still to come
  // A chunked body kept whole (keep_chunked_body()): the Content-Length it is sent with.
  std::optional<std::uint64_t> kept_length;
  std::optional<std::chrono::seconds> origin_idle_timeout;  // from the response's Keep-Alive
  // The final response's framing towards the client (respond_at_once()), and how much of it a
  // write at once left sent when the client took only part of it.
  ResponseFraming framing;
  std::size_t written_at_once = 0;
  // Response compression (docs/compression.md), on a route with `compress` only: what the request
  // accepts (taken when it is routed), and the final answer's encoder when it is compressed.
  compress::RequestSide compress_side;
  compress::Encoder encoder;
  std::unique_ptr<idempotency::Ticket> idem;  // set when the request's Idempotency-Key is guarded
  // The attempt loop's state (handle_request()), here so that it outlives forward_attempts()
  // without a frame of handle_request's to hold it. Last: it refers to the record above.
  std::optional<Forwarder> forwarder;

  // The request's body can go again: kept whole, or none of it taken from the client yet.
  bool replayable() const noexcept { return body_kept || !body_consumed; }
};

// What the attempt loop (forward_attempts(), forwarder.hpp) asks of the HTTP/1 session: one try
// on a server (the upstream exchange's), the answer to the client, sluice's own answer, a timer.
// Every member coroutine it names is the session's or the exchange's (frames from the FramePool).
struct DownstreamSession::ForwardHooks {
  DownstreamSession& s;
  Exchange& x;

  net::awaitable<Failure> attempt(Endpoint& ep, Clock::time_point try_until) {
    return s.up_.attempt(s, ep, try_until);
  }
  net::awaitable<bool> tunnel(Endpoint& ep) { return s.tunnel(x, ep); }
  bool respond_now(bool& reusable) { return s.respond_at_once(x, reusable); }
  net::awaitable<bool> respond() { return s.send_response(x); }
  bool delivered(Endpoint& ep, bool reusable) { return s.end_delivery(x, ep, reusable); }
  void drop() { s.up_.drop(); }
  net::awaitable<void> fail(const ProxyError& error) { return s.send_error(&x, error); }
  net::awaitable<bool> wait(Clock::duration d) { return s.wait_for(d); }
  bool replayable() const { return x.replayable(); }
  std::string_view retry_after() const { return s.up_.retry_after(); }
  double uniform() { return s.worker_.uniform(); }
  // forward_attempts()'s frame comes from the worker's FramePool, like the session's own.
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<bool>, ForwardHooks, Forwarder&>::promise_type,
                               PooledFrame<bool>>);
};

// The same for a request to an h2c or h2 upstream (downstream_h2.cpp). No 101 comes over HTTP/2,
// and the answer is relayed from its call, never at once.
struct DownstreamSession::H2ForwardHooks {
  DownstreamSession& s;
  Exchange& x;

  net::awaitable<Failure> attempt(Endpoint& ep, Clock::time_point try_until) {
    return s.attempt_h2(x, ep, try_until);
  }
  net::awaitable<bool> tunnel(Endpoint&) { co_return false; }
  bool respond_now(bool&) { return false; }
  net::awaitable<bool> respond() { return s.respond_h2(x); }
  bool delivered(Endpoint& ep, bool) { return s.end_h2_delivery(x, ep); }
  void drop() { s.h2_->end(); }
  net::awaitable<void> fail(const ProxyError& error) { return s.send_error(&x, error); }
  net::awaitable<bool> wait(Clock::duration d) { return s.wait_for(d); }
  bool replayable() const { return x.replayable(); }
  std::string_view retry_after() const { return s.h2_->retry_after(); }
  double uniform() { return s.worker_.uniform(); }
};

}  // namespace sluice::proxy
