// A request's way to an origin: what the attempt loop (forward_attempts(), forwarder.hpp) and one
// attempt (attempt_server(), upstream_attempt.hpp) ask of the downstream session, through
// ForwardHooks, AttemptHooks and HeadHooks; the body kept for a replay; the connection.
#include "downstream_exchange.hpp"

namespace sluice::proxy {

// A body kept before the first try (for replay, or validated: chunked), or the Idempotency-Key's
// gate: prepare_forward() has work to do.
bool DownstreamSession::prepares_body(const Exchange& x) const {
  return keeps_content_body(x) || (!x.request_done && x.chunked_in) || x.idem;
}

// The request's body kept (Content-Length up to the relay block, or chunked and validated), then
// its Idempotency-Key claimed. Anything but `forward` was answered here (or the client is gone).
net::awaitable<DownstreamSession::Prepared> DownstreamSession::prepare_forward(Exchange& x) {
  bool ready = true;  // no co_await inside && (GCC 12 miscompiles it, see run())
  if (keeps_content_body(x)) ready = co_await keep_body(x);
  if (ready && !x.request_done && x.chunked_in) ready = co_await keep_chunked_body(x);
  if (!ready) co_return Prepared::close;
  if (x.idem) ready = co_await idempotency_gate(x);
  if (ready) co_return Prepared::forward;
  co_return x.client_keep_alive && x.request_done ? Prepared::keep : Prepared::close;
}

// A wait between tries (backoff) or in the upstream's queue. False: the session was closed
// meanwhile.
net::awaitable<bool> DownstreamSession::wait_for(Clock::duration d) {
  if (!backoff_timer_) backoff_timer_.emplace(worker_.io);
  backoff_timer_->expires_after(d);
  co_await backoff_timer_->async_wait(nothrow);
  co_return !closed_;
}

// The request's framing, its idempotency ticket and retry facts, and its head rewritten for the
// origin (hop-by-hop removed, X-Forwarded-*, X-Request-Id).
proxy::RequestFacts DownstreamSession::begin_forward(Exchange& x) {
  const auto& req = *request_;
  const auto& retry = x.upstream->config().retry;
  if (relay_ == nullptr) relay_ = worker_.relay_blocks.acquire();
  // Expect: 100-continue is answered here, hop by hop, when we start reading the body (and is
  // not forwarded: splice_request_head()).
  if (const auto e = req.value(http::KnownField::expect); !e.empty())
    x.expect_continue = beast::iequals(e, "100-continue") && req.version() == 11 && !x.request_done;
  x.chunked_in = req.chunked();
  x.upgrade = http::wants_upgrade(req, !x.request_done);
  x.idem = idempotency::Ticket::make(x.upstream->shared_idempotency(), req, req.verb(), x.upgrade);
  proxy::RequestFacts facts;
  // An Upgrade request is never resent once a byte of it was written: the origin may have
  // switched already. (Connect failures are still retried.)
  facts.idempotent_method = http::is_idempotent(req.verb()) && !x.upgrade;
  facts.has_idempotency_key = !retry.idempotency_header.empty() && !x.upgrade &&
                              req.count(retry.idempotency_header, x.upstream->idempotency_field()) != 0;
  return facts;
}

// A Content-Length body up to `buffer` (and the relay block) is read before the first try and
// kept for replay; a larger or chunked body streams, and can only be resent if none of it was
// consumed yet. A guarded keyed body is kept too: its fingerprint needs all of it before
// forwarding.
bool DownstreamSession::keeps_content_body(const Exchange& x) const {
  const auto& retry = x.upstream->config().retry;
  if (x.request_done || x.chunked_in || (retry.attempts <= 1 && !x.idem)) return false;
  const auto limit = x.idem ? relay_size : std::min<std::uint64_t>(retry.buffer, relay_size);
  return request_->content_length().value_or(limit + 1) <= limit;
}

// The balancer's context of this request: the hash of its key, for hash upstreams.
PickContext DownstreamSession::pick_context(const Exchange& x) const {
  PickContext ctx;
  if (const auto& key = x.upstream->hash_key()) {
    if (const auto bytes = key->extract(*request_, request_->target(), x.client_ip)) {
      ctx.hash = hash_key_bytes(*bytes);
      ctx.has_hash = true;
    }
  }
  return ctx;
}

// After the answer went to the client: the body's failure reported, the connection pooled when
// it may be reused. A request body the client is still sending when the origin answered would
// desynchronise the connection: it is kept only when the request was read completely.
bool DownstreamSession::end_delivery(Exchange& x, Endpoint& ep, tls::StreamSlot& upstream,
                           bool reusable) {
  const auto& ucfg = x.upstream->config();
  upstream_ = nullptr;
  if (x.body_failure != FailureKind::none)
    report_attempt(*x.upstream, ep, worker_.index, Failure::of(x.body_failure));
  if (reusable) {
    worker_.pool.release(ep, std::move(upstream), ucfg.keepalive,
                         pooled_idle_time(ucfg.keepalive_timeout, x.origin_idle_timeout));
  }
  up_in_.clear();
  return x.client_keep_alive && x.request_done;
}

void DownstreamSession::drop_answer(tls::StreamSlot& upstream) {
  upstream_ = nullptr;
  upstream.reset();
  up_in_.clear();
  forget_response();
}

// Idempotency-Key (docs/idempotency.md): claims the key, or answers from the store or with a
// refusal (problem+json). True: forward the request.
net::awaitable<bool> DownstreamSession::idempotency_gate(Exchange& x) {
  auto& ticket = *x.idem;
  const auto& req = *request_;
  // The fingerprint needs the whole body before the first byte leaves: a body larger than the
  // relay block is refused (413), never forwarded unprotected.
  if (!x.request_done || x.chunked_in) {
    ticket.refuse_too_large(worker_.index);
  } else if (co_await ticket.begin(worker_.index, req, req.method(), req.target(),
                                   std::string_view(relay_, x.kept_body), client_ip_, closed_) ==
             idempotency::Ticket::Verdict::forward) {
    co_return true;
  }
  x.status = ticket.status();
  x.error = ticket.refusal();
  if (!ticket.keeps_connection()) x.client_keep_alive = false;
  const auto out = ticket.response(x.request_id, x.client_keep_alive && !worker_.is_stopping(),
                                   snapshot_->config->server.error_detail == config::ErrorDetail::full,
                                   worker_.date.now());
  expire_after(snapshot_->config->server.idle_timeout);
  auto [ec, n] = co_await net::async_write(client_, net::buffer(out.data(), out.size()), nothrow);
  // The access log counts the answer's body the client took, as it does an origin's.
  x.bytes_out = body_bytes_sent(out, n);
  if (n > 0) x.head_sent = true;
  if (timed(ec)) x.client_keep_alive = false;
  co_return false;
}

// attempt_server()'s hooks (upstream_attempt.hpp) for one try of one request on `ep`.
struct DownstreamSession::AttemptHooks {
  DownstreamSession& s;
  Exchange& x;
  Endpoint& ep;
  Clock::time_point try_until;

  net::awaitable<Failure> connect(tls::StreamSlot& upstream) {
    return s.connect(x, ep, upstream, try_until);
  }
  void ready(socket_type& upstream) {
    s.upstream_ = &upstream;
    x.upstream_ready = s.worker_.clock.now();
  }
  net::awaitable<FailureKind> send(socket_type& upstream, std::uint64_t& sent, std::size_t& received) {
    return s.send_request(x, upstream, try_until, sent, received);
  }
  unsigned status() const { return s.response_->status(); }
  void forget() {
    s.upstream_ = nullptr;
    s.up_in_.clear();
    s.forget_response();
  }
  // Resending on a new connection cannot duplicate work when the request is idempotent and its
  // body (if any) is still at hand.
  bool resend_on_new_connection() const {
    if (!http::is_idempotent(s.request_->verb()) || (!x.body_kept && x.body_consumed)) return false;
    spdlog::debug("upstream {} server {}: pooled connection was closed, reconnecting",
                  x.upstream->name(), ep.identity());
    return true;
  }
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<Failure>, AttemptHooks,
                                                     tls::StreamSlot&>::promise_type,
                               PooledFrame<Failure>>);
};

// One try on one server (attempt_server(), upstream_attempt.hpp): a pooled connection, unless the
// request is an upgrade (not resent after a pooled connection turns out closed, and consumed by a
// tunnel anyway) or the pooled one's TLS does not fit; else a new one. Not a coroutine: the try's
// frame is attempt_server()'s alone.
net::awaitable<Failure> DownstreamSession::try_server(Exchange& x, Endpoint& ep,
                                            tls::StreamSlot& upstream,
                                            Clock::time_point try_until) {
  upstream.reset();
  if (!x.upgrade) worker_.pool.acquire(ep, upstream);
  if (upstream && !tls_fits(*x.upstream, ep, *upstream)) upstream.reset();
  return attempt_server(AttemptHooks{*this, x, ep, try_until}, upstream);
}

// A new connection to `ep` in `upstream` (TCP, then TLS if the server has it), within
// connect_timeout and the try's time. On failure `upstream` is empty.
net::awaitable<Failure> DownstreamSession::connect(Exchange& x, Endpoint& ep, tls::StreamSlot& upstream,
                                         Clock::time_point try_until) {
  upstream.emplace(worker_.io);
  upstream_ = &*upstream;
  deadline = std::min(try_until, worker_.clock.now() + Clock::duration(x.upstream->config().connect_timeout));
  timed_out_ = false;
  error_code ec;
  tls::edge::open_socket(upstream->socket(), ep.socket_address().protocol(), ec);  // close-on-exec
  if (!ec) std::tie(ec) = co_await upstream->socket().async_connect(ep.socket_address(), nothrow);
  Failure failure;
  if (ec) {
    const bool timeout = ec == net::error::operation_aborted && timed_out_;
    failure = Failure::of(timeout                                ? FailureKind::connect_timeout
                          : ec == net::error::connection_refused ? FailureKind::connect_refused
                                                                 : FailureKind::connect_error);
  } else {
    error_code ignored;
    upstream->socket().set_option(tcp::no_delay(true), ignored);
    // The handshake shares the connect deadline: connect_timeout covers setting up the
    // connection, TLS included.
    if (ep.tls()) failure = co_await connect_tls(*x.upstream, ep, *upstream);
  }
  if (failure.failed()) {
    upstream_ = nullptr;
    upstream.reset();
  }
  co_return failure;
}

// Head and body towards the origin, then the response head. The body streams through relay_:
// Content-Length bodies as they are, chunked bodies validated chunk by chunk by chunked_ and
// re-encoded, so that what the origin sees is exactly what we validated.
net::awaitable<FailureKind> DownstreamSession::send_request(Exchange& x, socket_type& upstream,
                                                  Clock::time_point try_until,
                                                  std::uint64_t& sent, std::size_t& received) {
  write_request_head(x);
  // A body still to be read from the client streams while the answer is read (full duplex).
  if (!x.body_kept && (!x.request_done || x.chunked_in))
    return send_streamed(x, upstream, try_until, x.upstream->config().send_timeout, sent, received);
  // No body, or the whole body kept in relay_: one write, repeatable on a retry.
  const std::array<net::const_buffer, 2> out{net::buffer(head_out_),
                                             net::buffer(relay_, x.body_kept ? x.kept_body : 0)};
  deadline = try_until;
  timed_out_ = false;
  return send_whole(HeadHooks{*this, x, try_until, received}, upstream, out, up_in_,
                    snapshot_->config->server.max_header_bytes, sent);
}

// Exchange is defined here, not in downstream_upload.cpp, where send_streamed() says this.
void DownstreamSession::note_unsent(Exchange& x, bool unsent) noexcept { x.request_unsent = unsent; }

}  // namespace sluice::proxy
