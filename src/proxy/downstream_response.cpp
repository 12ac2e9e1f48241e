// The origin's answer towards the client: interim 1xx heads passed on, the final head and the
// response relay (relay_response(), response_relay.hpp, through ResponseHooks), and after a 101
// the handoff to a TunnelSession.
#include "downstream_exchange.hpp"

namespace sluice::proxy {

// An interim head: other 1xx than 100 go to HTTP/1.1 clients as they are (the exchange keeps 100,
// which answered the origin's own framing). False when the client is gone.
net::awaitable<InterimFate> DownstreamSession::interim(const http::ResponseHead& head) {
  if (x_->client_version != 11) co_return InterimFate::withheld;
  write_interim_head(head);
  expire_after(snapshot_->config->server.idle_timeout);
  auto [ec, n] = co_await net::async_write(client_, net::buffer(head_out_), nothrow);
  co_return timed(ec) ? InterimFate::client_gone : InterimFate::written;
}

// An interim head towards the client, in head_out_ (hop-by-hop fields stripped as in any head).
void DownstreamSession::write_interim_head(const http::ResponseHead& head) {
  head_out_.clear();
  http::ResponseSplice edits;
  edits.kind = http::ResponseSplice::Kind::interim;
  http::splice_response_head(head_out_, head, edits);
}

// relay_response()'s hooks (response_relay.hpp) for the exchange's final response.
struct DownstreamSession::ResponseHooks {
  DownstreamSession& s;
  Exchange& x;

  void reading() { s.expire_after(x.upstream->config().response_timeout); }
  void writing() { s.expire_after(s.snapshot_->config->server.idle_timeout); }
  error_code timed(error_code ec) const { return s.timed(ec); }
  // A piece reached the client: counted, and captured for a replay.
  void sent(std::string_view piece) {
    x.head_sent = true;
    x.bytes_out += piece.size();
    if (x.idem) x.idem->capture_body(piece);
  }
  void head_reached() { x.head_sent = true; }
  bool client_has_room(std::size_t n) { return s.client_.unsent_room(client_unsent_max) >= n; }
  net::awaitable<void> wait_client_room(std::span<char>& relay, error_code& ec) {
    return s.wait_client_room(relay, nullptr, ec);
  }
  net::awaitable<void> wait_client_room(std::span<char>& relay, std::span<char>& coded, error_code& ec) {
    return s.wait_client_room(relay, &coded, ec);
  }
  // A coroutine: send_error() takes the error by reference (the error path only).
  net::awaitable<void> refused() { co_await s.send_error(&x, error_for(Failure::of(FailureKind::bad_response))); }
  net::awaitable<void> body_failed(error_code ec, bool head_written, FailureKind failure) {
    return s.body_failed(x, ec, head_written, failure);
  }
  // The client left (or stopped reading past idle_timeout) before the answer was whole: a cut,
  // logged and counted as one, though the origin's status went out.
  void client_failed(error_code ec) {
    x.client_keep_alive = false;
    x.error = ec == beast::error::timeout ? client_write_timeout : client_closed;
    x.cut = Exchange::Cut::client;
  }
  // A compressed answer: the origin's piece is what a replay keeps, the coded bytes what was sent.
  void sent_coded(std::string_view piece, std::size_t coded) {
    x.head_sent = true;
    x.bytes_out += coded;
    if (x.idem) x.idem->capture_body(piece);
  }
  net::awaitable<void> coding_failed(error_code ec, bool head_written) {
    return s.coding_failed(x, ec, head_written);
  }
  void done() {
    if (x.idem) x.idem->capture_end();
  }
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<bool>, ResponseHooks, tls::Stream&, HeadBuffer&,
                                                     tls::Stream&, ResponseFraming, std::string&,
                                                     std::span<char>, http::ChunkedDecoder&>::promise_type,
                               PooledFrame<bool>>);
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<bool>, ResponseHooks, HeadBuffer&, tls::Stream&,
                                                     ResponseFraming, std::string&, std::size_t>::promise_type,
                               PooledFrame<bool>>);
  // The wait for a slow client's room (response_relay.hpp) too.
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<bool>, ResponseHooks, bool&,
                                                     std::span<char>&>::promise_type,
                               PooledFrame<bool>>);
  // A compressed answer's relay and its per-piece steps (compressed_relay.hpp) too.
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<detail::CodedSend>, ResponseHooks, tls::Stream&,
                                                     std::string&, bool&, compress::Encoder&, std::string_view,
                                                     std::span<char>, bool>::promise_type,
                               PooledFrame<detail::CodedSend>>);
};

// The response's framing towards the client and its head (begin_response()), then the common
// answer at once (relay_at_once(), response_relay.hpp: no body, or a small one that came whole
// with its head, in one non-blocking write). True: it was delivered, and `reusable` says whether
// the upstream connection may go back to the pool; false: send_response() delivers it.
bool DownstreamSession::respond_at_once(Exchange& x, bool& reusable) {
  const bool is_head = request_->verb() == bhttp::verb::head;
  auto& framing = x.framing;
  // A request the origin answered before it had all of it leaves the connection mid-message.
  const auto& res = up_.response();
  framing.reusable = res.keep_alive(is_head) && !up_.request_unsent();
  framing.content_length = res.content_length().value_or(0);
  framing.plan = begin_response(x, is_head);
  if (!framing.plan.keep_alive) x.client_keep_alive = false;
  ResponseHooks hooks{*this, x};
  const auto at_once = relay_at_once(hooks, up_.in(), client_, framing, head_out_);
  if (at_once.state == AtOnce::partly) x.written_at_once = at_once.written;
  reusable = at_once.reusable;
  return at_once.state == AtOnce::relayed;
}

// Response head and body towards the client after respond_at_once() (relay_response(),
// response_relay.hpp, or the rest of a write at once). Returns whether the upstream connection
// may go back to the pool: only after a complete, correctly framed response with nothing left
// over. Not a coroutine: the relay's frame is its own.
net::awaitable<bool> DownstreamSession::send_response(Exchange& x) {
  if (x.written_at_once > 0) {
    return finish_at_once(ResponseHooks{*this, x}, up_.in(), client_, x.framing, head_out_, x.written_at_once);
  }
  if (x.framing.plan.chunked_in) {
    up_.chunked() = http::ChunkedDecoder(
        {.max_line = 4096, .max_trailer = snapshot_->config->server.max_header_bytes});
  }
  if (x.encoder) {
    // The relay block's last 16 KiB take the encoder's output.
    constexpr std::size_t coded_size = coded_block_size;
    return relay_compressed(ResponseHooks{*this, x}, up_.stream(), up_.in(), client_, x.framing, head_out_,
                            std::span(relay_, relay_size - coded_size),
                            std::span(relay_ + relay_size - coded_size, coded_size), up_.chunked(), x.encoder);
  }
  return relay_response(ResponseHooks{*this, x}, up_.stream(), up_.in(), client_, x.framing, head_out_,
                        std::span(relay_, relay_size), up_.chunked());
}

// The response's framing towards the client, and its head (rewritten, with the route's rules)
// in head_out_ unless the framing is refused.
http::ResponsePlan DownstreamSession::begin_response(Exchange& x, bool is_head) {
  const auto& res = up_.response();
  x.status = res.status();
  x.origin_idle_timeout = http::keep_alive_timeout(res.value(http::KnownField::keep_alive));
  // An answer that came before the client's body was read to the end closes the connection.
  auto plan = http::plan_response(res, is_head, x.client_version,
                                  x.client_keep_alive && x.request_done && !worker_.is_stopping());
  if (plan.refuse) return plan;
  if (x.idem) x.idem->capture_head(res, x.attempts);
  const auto coding = plan_coding(x, plan);
  write_response_head(x, res, plan, coding);
  return plan;
}

// Whether the final response is compressed (compress::plan(), docs/compression.md), on a route
// with `compress`: its encoder taken from the worker's pool, and its body sent chunked. A pool that
// cannot allocate leaves the body as it is.
compress::Plan DownstreamSession::plan_coding(Exchange& x, http::ResponsePlan& plan) {
  const auto* policy = x.route->compress;
  if (policy == nullptr) return {};
  const auto& res = up_.response();
  // plan() skipped every answer without a body (HEAD, 1xx, 204, 304) already.
  const auto coding = compress::take_encoder(compress::plan(*policy, res, x.compress_side), *policy, worker_.encoders,
                                             res.content_length().value_or(0), x.encoder);
  if (coding.compress()) plan.chunked_out = true;
  return coding;
}

// The origin's body failed. Before its head reached the client the answer is still ours (502
// with the failure); after, the client connection is cut, and the exchange is logged as
// `upstream body cut`, counted in its own status class and against the server (end_delivery()).
net::awaitable<void> DownstreamSession::body_failed(Exchange& x, error_code ec, bool head_written,
                                          FailureKind failure) {
  spdlog::debug("upstream {} server {}: response body failed: {}", x.upstream->name(),
                x.server->identity(), ec.message());
  x.client_keep_alive = false;
  x.body_failure = failure;
  if (!head_written) {
    co_await send_error(&x, error_for(Failure::of(failure)));
    co_return;
  }
  x.error = upstream_body_cut;
  x.cut = Exchange::Cut::origin;
}

// The client's socket holds as much unsent as it may (client_unsent_max): waits until it takes
// more (the kernel says writable once half of that is sent), under the client's write deadline,
// with the relay block and the origin's read buffer back in the worker's pools meanwhile. A slow
// reader then holds neither while it reads, and the rest of its answer waits in the origin's
// socket.
net::awaitable<void> DownstreamSession::wait_client_room(std::span<char>& relay, std::span<char>* coded,
                                                         error_code& ec) {
  const auto relay_at = relay.data() - relay_;
  const auto coded_at = coded != nullptr ? coded->data() - relay_ : 0;
  worker_.relay_blocks.release(std::exchange(relay_, nullptr));
  // What came with the origin's head was relayed: its read buffer goes back as well (a chunked
  // body's next read takes one again). The response head over its bytes was spliced already.
  if (up_.in().size() == 0) {
    up_.forget_response();
    up_.release_buffer();
  }
  expire_after(snapshot_->config->server.idle_timeout);
  std::tie(ec) = co_await client_.socket().async_wait(tcp::socket::wait_write, nothrow);
  relay_ = worker_.relay_blocks.acquire();
  relay = std::span(relay_ + relay_at, relay.size());
  if (coded != nullptr) *coded = std::span(relay_ + coded_at, coded->size());
}

// The response's encoder failed (its library could not allocate). Neither the origin's fault (its
// body was whole so far) nor the client's: before the head left, sluice's own 500; after, the
// client connection is cut, and the exchange counted as sluice's own 5xx (log_exchange()).
net::awaitable<void> DownstreamSession::coding_failed(Exchange& x, error_code ec, bool head_written) {
  spdlog::warn("upstream {}: compressing a response failed: {}", x.upstream->name(), ec.message());
  x.client_keep_alive = false;
  if (!head_written) {
    co_await send_error(&x, ProxyError{500, compression_failed});
    co_return;
  }
  x.error = compression_failed;
  x.cut = Exchange::Cut::sluice;
}

// After a valid 101: the 101 to the client, then both streams to a TunnelSession
// (tunnel_session.hpp), which the worker starts once run() has ended (take_tunnel()). False: a
// tunnel is the connection's last use as HTTP, on both sides.
net::awaitable<bool> DownstreamSession::tunnel(Exchange& x, Endpoint& ep) {
  report_attempt(*x.upstream, ep, worker_.index, Failure::answered(101));
  write_switch_head(x);
  expire_after(snapshot_->config->server.idle_timeout);
  auto [ec, n] = co_await net::async_write(client_, net::buffer(head_out_), nothrow);
  if (n > 0) x.head_sent = true;
  if (timed(ec) || closed_) {
    up_.drop();
    co_return false;
  }
  spdlog::debug("upstream {} server {}: tunnel open ({})", x.upstream->name(), ep.identity(),
                up_.response().value(http::KnownField::upgrade));
  hand_over(x, ep);
  co_return false;
}

// The handoff: both streams, the tunnel's in-flight count on `ep`, the relay block with the bytes
// that came with the heads, and the exchange's access-log record (written when the tunnel closes).
void DownstreamSession::hand_over(Exchange& x, Endpoint& ep) {
  tunnel_ = std::make_unique<TunnelHandoff>(std::move(client_), up_.take_stream(), snapshot_,
                                            *x.upstream, ep,
                                            PooledBlock(worker_.relay_blocks, std::exchange(relay_, nullptr)));
  auto& h = *tunnel_;
  const auto half = relay_size / 2;
  const auto keep = [&](std::string_view pending, char* to, std::size_t& size, std::string& extra) {
    if (pending.size() <= half) {
      std::memcpy(to, pending.data(), pending.size());
      size = pending.size();
    } else {
      extra.assign(pending);
    }
  };
  keep(view(in_), h.relay.get(), h.client_pending, h.client_extra);
  keep(view(up_.in()), h.relay.get() + half, h.origin_pending, h.origin_extra);
  in_.clear();
  up_.in().clear();
  h.start = x.start;
  if (worker_.access_log.enabled()) {
    AttemptRecord::ServersText servers;
    h.log.emplace(access_record(x, servers));
  }
  closed_ = true;  // the streams are the tunnel's now
}

// The 101 towards the client, in head_out_: the origin's reason and fields, rewritten.
void DownstreamSession::write_switch_head(Exchange& x) {
  x.status = 101;
  head_out_.clear();
  http::ResponseSplice edits;
  edits.request_id = x.request_id;
  edits.kind = http::ResponseSplice::Kind::switching;
  edits.date = worker_.date.now();
  http::splice_response_head(head_out_, up_.response(), edits);
}

}  // namespace sluice::proxy
