// The request's body as the client sends it: kept whole for a replay when it fits the relay block
// (keep_body(), keep_chunked_body(): a chunked one validated before any of it leaves),
// 100-continue, or read piece by piece for the upstream exchange's streamed upload
// (next_upload_piece(), upstream_upload.cpp), under the upload's deadlines.
#include <algorithm>

#include "downstream_exchange.hpp"

namespace sluice::proxy {

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
// one leaves what was decoded so far in relay_ for next_upload_piece() (chunked_pending_).
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
    up_.body_read_done();
    ec = timed(ec);
    in_.commit(n);
    if (ec) {
      if (ec == beast::error::timeout) co_await send_error(&x, {408, "body timeout"});
      co_return BodyStep::failed;
    }
  }
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
net::awaitable<UploadPiece> DownstreamSession::next_piece() { return next_upload_piece(*x_); }

void DownstreamSession::arm_body_read() { up_.arm_body_read(snapshot_->config->server.idle_timeout); }

net::awaitable<UploadPiece> DownstreamSession::next_upload_piece(Exchange& x) {
  const auto& limits = snapshot_->config->server;
  auto& up = *up_.upload();
  auto& content_left = x.content_left;
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
