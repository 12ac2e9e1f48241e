// The request's body: kept whole for a replay when it fits the relay block (keep_body(),
// keep_chunked_body(): a chunked one validated before any of it leaves), 100-continue, or streamed.
// Streamed, an attempt is full duplex (upload.hpp): the body and the origin's response head at the
// same time, as two coroutines on the worker's thread. The upload (stream_request()) forwards the
// body; the response side reads the head meanwhile, so that an origin answering before it read
// the body (413 + close) is heard before its reset. Timing: the body is bounded by send_timeout
// without progress, the answer by the attempt's time counted from the last request byte.
#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_suffix.hpp>

#include "downstream_exchange.hpp"
#include "sluice/proxy/request_relay.hpp"

namespace sluice::proxy {

namespace {
// How often the socket buffer is looked at while waiting for the origin (one ioctl per look).
constexpr std::chrono::milliseconds drain_look{50};
}

FailureKind upload_outcome(const UploadState& state, FailureKind upload,
                           FailureKind head, std::uint64_t sent) {
  // The upload already answered the client (400, 408, 413) or the client is gone.
  if (upload == FailureKind::client_failed) return FailureKind::client_failed;
  if (head == FailureKind::none) return FailureKind::none;
  if (state.stall == UploadState::Stall::origin || upload == FailureKind::send_timeout)
    return FailureKind::send_timeout;
  if (head == FailureKind::reset_after_send && sent == 0) return FailureKind::reset_before_send;
  return head;
}

net::awaitable<FailureKind> DownstreamSession::send_streamed(Exchange& x, socket_type& upstream,
                                                   Clock::time_point try_until,
                                                   Clock::duration send_timeout,
                                                   std::uint64_t& sent, std::size_t& received) {
  using namespace net::experimental::awaitable_operators;
  const auto now = worker_.clock.now();
  UploadState state;
  state.send_timeout = send_timeout;
  state.response_budget = try_until > now ? try_until - now : Clock::duration::zero();
  upload_ = &state;
  // `&&` waits for both sides (neither throws): each stops the other when it must (upload.hpp).
  const auto [upload, head] = co_await (upload_side(x, upstream, sent) &&
                                        response_side(x, upstream, try_until, received));
  upload_ = nullptr;
  note_unsent(x, !state.fully_sent);
  co_return upload_outcome(state, upload, head, sent);
}

net::awaitable<FailureKind> DownstreamSession::upload_side(Exchange& x, socket_type& upstream,
                                                 std::uint64_t& sent) {
  const auto failure = co_await stream_request(x, upstream, sent);
  if (failure == FailureKind::client_failed) {
    // Nothing to relay to a client that failed: the response side stops reading.
    upload_->sending = false;
    upload_->client_failed = true;
    error_code ignored;
    upstream.cancel(ignored);
  }
  co_return failure;
}

net::awaitable<FailureKind> DownstreamSession::response_side(Exchange& x, socket_type& upstream,
                                                   Clock::time_point try_until,
                                                   std::size_t& received) {
  const auto failure = co_await read_response_head(x, upstream, try_until, received);
  // A final answer (or the origin's reset) before the whole body was sent: the rest of the body
  // is not forwarded (RFC 9112 §9.5: a sender seeing such an answer ceases transmitting the body).
  if (upload_->draining) look_at_drain();  // did the origin take every byte before answering?
  if (upload_->sending && !upload_->draining) stop_upload(upstream);
  co_return failure;
}

void DownstreamSession::stop_upload(socket_type& upstream) {
  upload_->stop = true;
  error_code ignored;
  if (upload_->reading_client) {
    client_.cancel(ignored);
  } else {
    upstream.cancel(ignored);
  }
}

// Writes `out` to the origin step by step: each step, and each look (look_at_drain()) finding
// fewer bytes queued in the socket, is progress, so a slow but steady reader is never cut, a
// stopped one is after send_timeout.
net::awaitable<error_code> DownstreamSession::write_upstream(socket_type& upstream,
                                                   std::span<const net::const_buffer> out,
                                                   std::uint64_t& sent) {
  beast::buffers_suffix<std::span<const net::const_buffer>> rest(out);
  while (beast::buffer_bytes(rest) != 0) {
    upload_->wrote(worker_.clock.now());
    expire_after(std::min<Clock::duration>(drain_look, upload_->send_timeout));
    auto [ec, n] = co_await upstream.async_write_some(rest, nothrow);
    rest.consume(n);
    sent += n;
    if (ec) co_return timed(ec);
  }
  co_return error_code{};
}

bool DownstreamSession::look_at_drain() {
  int queued = 0;  // a failed look counts as drained: the response deadline then runs
  if (upstream_ != nullptr) ::ioctl(upstream_->socket().native_handle(), SIOCOUTQ, &queued);
  const auto now = worker_.clock.now();
  switch (upload_->drain_step(static_cast<std::size_t>(std::max(queued, 0)), now)) {
    case UploadState::Drain::done:
      deadline = upload_->response_until;
      return true;
    case UploadState::Drain::progressing:
      deadline = now + std::min<Clock::duration>(drain_look, upload_->send_timeout);
      return true;
    case UploadState::Drain::stalled: break;
  }
  return false;
}

void DownstreamSession::arm_body_read() {
  if (upload_ == nullptr) {
    expire_after(snapshot_->config->server.idle_timeout);
    return;
  }
  upload_->reading_client = true;
  expire_after(upload_->send_timeout);
}

void DownstreamSession::arm_response(Clock::time_point try_until) {
  timed_out_ = false;
  if (upload_ == nullptr) {
    deadline = try_until;
  } else if (upload_->sending) {
    // The upload's own bound again (an interim answer's write to the client replaced it): the
    // client's idle time, or the next look at what the origin took.
    deadline = worker_.clock.now() + (upload_->reading_client
                                          ? upload_->send_timeout
                                          : std::min<Clock::duration>(drain_look, upload_->send_timeout));
  } else {
    deadline = upload_->response_until;
  }
}

// Reads a Content-Length body that fits the relay block into it, for replay.
net::awaitable<bool> DownstreamSession::keep_body(Exchange& x) {
  const auto& limits = snapshot_->config->server;
  const auto length = static_cast<std::size_t>(*request_->content_length());
  if (!co_await send_continue(x)) co_return false;
  std::size_t have = std::min(length, in_.size());
  std::memcpy(relay_, in_.data().data(), have);
  in_.consume(have);
  while (have < length) {
    expire_after(limits.idle_timeout);
    auto [ec, n] = co_await client_.async_read_some(net::buffer(relay_ + have, length - have), nothrow);
    ec = timed(ec);
    if (ec) {
      if (ec == beast::error::timeout) co_await send_error(&x, {408, "body timeout"});
      co_return false;
    }
    have += n;
  }
  x.kept_body = length;
  x.body_kept = true;
  x.bytes_in = length;
  x.request_done = true;
  co_return true;
}

// Expect: 100-continue is answered hop by hop when we start reading the body.
net::awaitable<bool> DownstreamSession::send_continue(Exchange& x) {
  if (!x.expect_continue) co_return true;
  x.expect_continue = false;
  static constexpr std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
  expire_after(snapshot_->config->server.idle_timeout);
  auto [ec, n] = co_await net::async_write(client_, net::buffer(cont), nothrow);
  co_return !timed(ec);
}

// A chunked body is read and validated before the first byte goes upstream, as long as it fits
// the relay block: a malformed one is refused with nothing of it forwarded (nginx buffers such
// bodies too). A body that fits is kept for replay and forwarded with a Content-Length; a longer
// one leaves what was decoded so far in relay_ for stream_request() (chunked_pending_).
net::awaitable<bool> DownstreamSession::keep_chunked_body(Exchange& x) {
  const auto& limits = snapshot_->config->server;
  chunked_ = http::ChunkedDecoder({.max_line = 4096, .max_trailer = limits.max_header_bytes});
  chunked_pending_ = 0;
  if (!co_await send_continue(x)) co_return false;
  std::size_t have = 0;
  const auto step = co_await decode_chunked(x, have, false);
  if (step == BodyStep::failed) co_return false;
  x.body_consumed = true;
  if (step == BodyStep::some) {
    chunked_pending_ = have;
    co_return true;
  }
  // Trailer fields were checked and are dropped, like the chunk extensions: a body with a known
  // length no longer needs them to be framed (RFC 9112 §7.1.3 lets a proxy discard them).
  x.chunked_in = false;
  x.kept_body = have;
  x.body_kept = true;
  x.kept_length = have;
  co_return true;
}

// Decodes the client's chunked body into relay_[have, relay_size), reading as needed, until the
// body ends (done) or relay_ is full (some). With `flush`, also stops (some) once every byte
// buffered from the client is decoded and the data ends at a chunk boundary: each chunk is
// forwarded only after its data and CRLF were validated (a chunk larger than relay_ goes in
// relay_-sized pieces). Malformed input is answered here, at the byte where it went wrong.
net::awaitable<DownstreamSession::BodyStep> DownstreamSession::decode_chunked(Exchange& x, std::size_t& have, bool flush) {
  const auto& limits = snapshot_->config->server;
  for (;;) {
    using Outcome = http::ChunkedFeed::Outcome;
    const auto f = http::feed_chunked(chunked_, view(in_), std::span(relay_, relay_size), have,
                                      x.bytes_in, limits.max_body_bytes, flush);
    in_.consume(f.consumed);
    if (f.outcome == Outcome::invalid) {
      co_await send_error(&x, {http::status_for(f.violation), http::describe(f.violation)});
      co_return BodyStep::failed;
    }
    if (f.outcome == Outcome::too_large) {
      co_await send_error(&x, {413, "body too large"});
      co_return BodyStep::failed;
    }
    if (f.outcome == Outcome::done) {
      x.request_done = true;
      co_return BodyStep::done;
    }
    if (f.outcome == Outcome::some) co_return BodyStep::some;
    arm_body_read();
    auto [ec, n] = co_await client_.async_read_some(prepare_some(in_), nothrow);
    if (upload_ != nullptr) upload_->reading_client = false;
    ec = timed(ec);
    in_.commit(n);
    if (ec) {
      if (ec == beast::error::timeout) co_await send_error(&x, {408, "body timeout"});
      co_return BodyStep::failed;
    }
  }
}

// stream_request_body()'s hooks (request_relay.hpp) for one streamed attempt: the body's pieces
// as next_upload_piece() reads them, writes under the upload's deadlines (write_upstream()), and
// the upload's state (upload_, shared with the response side).
struct DownstreamSession::UploadHooks {
  DownstreamSession& s;
  Exchange& x;
  std::uint64_t& sent_bytes;  // the attempt's count of request bytes written
  std::uint64_t content_left;

  net::awaitable<UploadPiece> next() { return s.next_upload_piece(x, content_left); }
  net::awaitable<error_code> write(socket_type& upstream, std::span<const net::const_buffer> out) {
    return s.write_upstream(upstream, out, sent_bytes);
  }
  bool stopped() const { return s.upload_->stop; }
  FailureKind write_failed() {
    auto& up = *s.upload_;
    if (up.stopped()) return FailureKind::none;
    up.send_failed(s.worker_.clock.now());
    if (up.stall == UploadState::Stall::origin) return FailureKind::send_timeout;
    s.arm_response({});  // the origin may still have said why
    return sent_bytes == 0 ? FailureKind::reset_before_send : FailureKind::reset_after_send;
  }
  // A Content-Length piece that came with the head is consumed once it is written.
  void sent(std::string_view piece) {
    if (!x.chunked_in && !piece.empty() && piece.data() == view(s.in_).data()) {
      s.in_.consume(piece.size());
      x.body_consumed = true;
    }
  }
  // Every byte is written; the response deadline starts once the origin took them all.
  void all_sent() {
    auto& up = *s.upload_;
    up.draining = true;
    up.wrote(s.worker_.clock.now());
    s.timed_out_ = false;
    s.look_at_drain();
  }
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<FailureKind>, UploadHooks, tls::Stream&,
                                                     std::string_view, bool, bool>::promise_type,
                               PooledFrame<FailureKind>>);
};

// The head and a body read from the client as it comes (stream_request_body(), request_relay.hpp),
// while response_side() reads the answer: ends when the body is sent, when the origin answered
// first (upload_->stop) or when either side failed (upload.hpp). Not a coroutine: the relay's
// frame is its own.
net::awaitable<FailureKind> DownstreamSession::stream_request(Exchange& x, socket_type& upstream,
                                                              std::uint64_t& sent) {
  const auto content_left = x.chunked_in ? 0 : request_->content_length().value_or(0);
  return stream_request_body(UploadHooks{*this, x, sent, content_left}, upstream, head_out_,
                             x.chunked_in, x.request_done);
}

// A plain client's Content-Length body with nothing buffered: the bytes the kernel has now
// (true: in `read`). False: none yet, or the stream is TLS or has bytes buffered (read_piece()).
bool DownstreamSession::body_bytes_now(std::uint64_t content_left, BodyPiece& read) {
  if (!waits_without_relay()) return false;
  const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(relay_size, content_left));
  const auto n = client_.try_read_some(net::buffer(relay_, want));
  read = BodyPiece{{}, {relay_, n}, false};
  return n > 0;
}

// Whether the wait for a body's next bytes can hold no relay block: a plain client (readiness is
// the kernel's) with nothing buffered behind what was forwarded. A body trickling in a byte at a
// time then pins none of the worker's 64 KiB blocks while it waits, as it pins no head buffer
// while the origin has not answered (read_final_head()).
bool DownstreamSession::waits_without_relay() const {
  return in_.size() == 0 && !client_.is_tls();
}

// The next piece of a streamed body: what keep_chunked_body() decoded first, then validated
// chunks as they complete; or Content-Length bytes, those that came with the head first. Or what
// the upload ends with: none when the response side stopped it, client_failed when the client
// failed (and was answered).
net::awaitable<UploadPiece> DownstreamSession::next_upload_piece(Exchange& x, std::uint64_t& content_left) {
  const auto& limits = snapshot_->config->server;
  auto& up = *upload_;
  if (!co_await send_continue(x)) co_return UploadPiece::ends(FailureKind::client_failed);
  if (x.chunked_in) {
    std::size_t have = std::exchange(chunked_pending_, 0);
    if (have == 0) {
      if (co_await decode_chunked(x, have, true) == BodyStep::failed)
        co_return UploadPiece::ends(up.stopped() ? FailureKind::none : FailureKind::client_failed);
    }
    x.request_done = chunked_.done();
    x.body_consumed = true;
    co_return UploadPiece{{relay_, have}, x.request_done, {}};  // decode_chunked() counts and bounds it
  }
  BodyPiece read;
  if (!body_bytes_now(content_left, read)) {
    if (waits_without_relay()) {
      arm_body_read();
      worker_.relay_blocks.release(std::exchange(relay_, nullptr));
      co_await client_.readable(read.ec);
      relay_ = worker_.relay_blocks.acquire();
    }
    if (!read.ec)
      read = co_await read_piece(client_, in_, std::span(relay_, relay_size), content_left, false,
                                 [this] { arm_body_read(); }, true);
  }
  if (!read.buffered) {
    up.reading_client = false;
    if (const auto ec = timed(read.ec)) {
      if (up.stopped()) co_return UploadPiece::ends(FailureKind::none);
      if (ec == beast::error::timeout || up.stall == UploadState::Stall::client)
        co_await send_error(&x, {408, "body timeout"});
      co_return UploadPiece::ends(FailureKind::client_failed);
    }
    x.body_consumed = true;
  }
  x.bytes_in += read.bytes.size();
  if (limits.max_body_bytes != 0 && x.bytes_in > limits.max_body_bytes) {
    co_await send_error(&x, {413, "body too large"});
    co_return UploadPiece::ends(FailureKind::client_failed);
  }
  content_left -= read.bytes.size();
  x.request_done = content_left == 0;
  co_return UploadPiece{read.bytes, x.request_done, {}};
}

}  // namespace sluice::proxy
