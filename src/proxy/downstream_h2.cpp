// An HTTP/1.1 client's request to the servers of an h2c or h2 upstream (docs/http2.md). Each try
// opens the request as a stream on a connection the worker shares with its other requests
// (h2_exchange.hpp) and sends its body: a kept one at once, a streamed one piece by piece as the
// client sends it (the same reads, limits and deadlines as towards an HTTP/1.1 server). The answer
// is awaited once the body went (or the server answered early); its head goes to the client as
// HTTP/1.1 with the route's rules and sluice's own fields, its DATA as the body, chunked when the
// server gave no length. Trailers are not passed on to HTTP/1.1 clients.
#include "downstream_exchange.hpp"

namespace sluice::proxy {

H2Exchange& DownstreamSession::h2_exchange() {
  if (h2_ == nullptr) h2_ = std::make_unique<H2Exchange>(worker_, *this, timed_out_);
  return *h2_;
}

net::awaitable<Failure> DownstreamSession::attempt_h2(Exchange& x, Endpoint& ep, Clock::time_point try_until) {
  auto& h2 = h2_exchange();
  const auto window = snapshot_->config->server.http2_initial_window_bytes;
  if (auto f = co_await h2.connect(*x.upstream, ep, try_until, window); f.failed()) co_return f;
  x.upstream_ready = worker_.clock.now();
  const bool tls = x.upstream->config().protocol == config::UpstreamProtocol::h2;
  if (!h2.request_fields(forward_head(), tls, false))
    co_return Failure::of(FailureKind::bad_response, "request not expressible in HTTP/2");
  const auto body = request_body();
  const bool has_body = body.streamed || !body.kept.empty();
  if (!h2.open(has_body, nullptr, snapshot_->config->server.max_header_bytes))
    co_return Failure::of(FailureKind::reset_before_send, "upstream HTTP/2 connection refused the stream");
  auto& call = *h2.call();
  if (body.streamed) {
    if (const auto kind = co_await upload_h2(x, call); kind != FailureKind::none) {
      h2.end();  // the stream reset (CANCEL): the server never sees the request end
      auto f = Failure::of(kind);
      f.request_bytes_sent = true;
      co_return f;
    }
  } else if (has_body) {
    call.offer(body.kept, true);  // relay_ holds it until the next request
  }
  co_return co_await h2.head(try_until, x.first_byte);
}

// A streamed body, one piece at a time as next_upload_piece() reads it (its 100-continue, limits,
// answers to the client and send_timeout without progress), each handed to the stream once
// nghttp2 took the last (within the server's window, under send_timeout). Stops without a failure
// when the server answered or closed the stream meanwhile: the answer (or its absence) is the
// try's outcome. client_failed: the client failed and was answered; send_timeout: the server took
// nothing for send_timeout.
net::awaitable<FailureKind> DownstreamSession::upload_h2(Exchange& x, H2Call& call) {
  UploadState state;
  state.send_timeout = x.upstream->config().send_timeout;
  state.sending = false;  // no socket buffer of sluice's own to look at (UploadState::drain_step)
  up_.lend_upload(&state);
  auto outcome = FailureKind::none;
  for (bool last = false; !last && !call.closed() && !call.head_done();) {
    const auto piece = co_await next_upload_piece(x);
    if (piece.end) {
      outcome = FailureKind::client_failed;
      break;
    }
    last = piece.last;
    call.offer(piece.bytes, last);
    expire_after(state.send_timeout);
    while (!call.upload_taken() && !call.closed() && !call.head_done() && !closed_ && !timed_out_)
      co_await call.wait_upload();
    if (closed_) {
      outcome = FailureKind::client_failed;
      break;
    }
    if (!call.upload_taken() && !call.closed() && !call.head_done()) {
      outcome = FailureKind::send_timeout;
      break;
    }
    piece_sent(piece.bytes);
  }
  up_.lend_upload(nullptr);
  co_return outcome;
}

// The answer's head, as HTTP/1.1 with the route's rules, then its body (relay_h2()).
net::awaitable<bool> DownstreamSession::respond_h2(Exchange& x) {
  auto& call = *h2_->call();
  const bool is_head = request_->verb() == bhttp::verb::head;
  auto* res = new (arena_.allocate(sizeof(http::ResponseHead), alignof(http::ResponseHead))) http::ResponseHead;
  x.status = call.status();
  const bool indexed = h2_->answer_head(*res, !is_head);
  auto plan = http::ResponsePlan{};
  if (indexed)
    plan = http::plan_response(*res, is_head, x.client_version,
                               x.client_keep_alive && x.request_done && !worker_.is_stopping());
  if (!indexed || plan.refuse) {
    x.body_failure = FailureKind::bad_response;
    co_await send_error(&x, error_for(Failure::of(FailureKind::bad_response)));
    co_return false;
  }
  if (!plan.keep_alive) x.client_keep_alive = false;
  if (x.idem) x.idem->capture_head(*res, x.attempts);
  write_response_head(x, *res, plan, {});
  co_return co_await relay_h2(x, call, plan);
}

// The answer's DATA as it comes, through a relay block of its own (the request's body may still
// be in relay_, waiting for the server's window): each piece written to the client (as a chunk
// when the answer is chunked towards it), and only then taken from the call, which opens the
// server's window by as much. A stream the server reset (or a connection lost) before its end, or
// no DATA for response_timeout, cuts the client's connection: it must not take the answer as
// whole. The head goes with the first piece.
net::awaitable<bool> DownstreamSession::relay_h2(Exchange& x, H2Call& call, const http::ResponsePlan& plan) {
  const auto& server = snapshot_->config->server;
  const auto response_timeout = x.upstream->config().response_timeout;
  PooledBlock block(worker_.relay_blocks, worker_.relay_blocks.acquire());
  std::string_view head = head_out_;
  for (;;) {
    expire_after(response_timeout);
    while (plan.body_expected && call.pending().empty() && !call.ended() && !call.closed() && !closed_ &&
           !timed_out_)
      co_await call.wait();
    if (closed_) co_return false;
    if (plan.body_expected && call.pending().empty() && !call.ended()) {
      const auto failure = timed_out_ ? FailureKind::response_timeout : FailureKind::reset_after_send;
      const auto ec = timed_out_ ? error_code(beast::error::timeout) : error_code(net::error::connection_reset);
      co_await body_failed(x, ec, head.empty(), failure);
      co_return false;
    }
    const auto n = plan.body_expected ? std::min(call.pending().size(), relay_size) : 0;
    std::memcpy(block.get(), call.pending().data(), n);
    const std::string_view data(block.get(), n);
    const bool last = !plan.body_expected || (call.ended() && n == call.pending().size());
    const http::ChunkHeader size(n);
    std::array<net::const_buffer, 5> out;
    std::size_t parts = 0;
    if (!head.empty()) out[parts++] = net::buffer(head);
    if (plan.chunked_out && n != 0) out[parts++] = net::buffer(size.view());
    if (n != 0) out[parts++] = net::buffer(data);
    if (plan.chunked_out && n != 0) out[parts++] = net::buffer(crlf);
    if (plan.chunked_out && last) out[parts++] = net::buffer(http::last_chunk);
    expire_after(server.idle_timeout);
    auto [ec, written] = co_await net::async_write(client_, std::span(out.data(), parts), nothrow);
    if (written > 0) x.head_sent = true;
    if (timed(ec)) {
      x.client_keep_alive = false;
      x.error = ec == beast::error::timeout ? client_write_timeout : client_closed;
      x.cut = Exchange::Cut::client;
      co_return false;
    }
    head = {};
    x.bytes_out += n;
    if (x.idem) x.idem->capture_body(data);
    call.take(n);
    if (last) {
      if (x.idem) x.idem->capture_end();
      co_return true;
    }
  }
}

// After the answer: a body the server broke off counts against it; the call ends (a stream the
// server still had open is reset). The client's connection goes on only when its request was read
// whole (an upload stopped by an early answer leaves its rest unread).
bool DownstreamSession::end_h2_delivery(Exchange& x, Endpoint& ep) {
  if (x.body_failure != FailureKind::none)
    report_attempt(*x.upstream, ep, worker_.index, Failure::of(x.body_failure));
  h2_->end();
  return x.client_keep_alive && x.request_done;
}

}  // namespace sluice::proxy
