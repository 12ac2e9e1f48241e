// A request's way to an origin: what the attempt loop (forward_attempts(), forwarder.hpp) asks of
// the downstream session through ForwardHooks, and the upstream exchange (upstream_exchange.hpp)
// through ClientSide; the body kept for a replay.
#include "downstream_exchange.hpp"

namespace sluice::proxy {

// The attempt loop's state, in the exchange (run()'s frame, which outlives the loop), and the
// upstream exchange's for this request.
Forwarder& DownstreamSession::start_attempts(Exchange& x, RequestFacts facts) {
  up_.begin(*x.upstream, x, snapshot_->config->server.max_header_bytes, x.upgrade);
  return x.forwarder.emplace(*x.upstream, worker_.clock, worker_.index, facts, pick_context(x), x);
}

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
  return request_pick_context(*x.upstream, *request_, x.client_ip);
}

// After the answer went to the client: the body's failure reported, the connection pooled when
// it may be reused. A request body the client is still sending when the origin answered would
// desynchronise the connection: it is kept only when the request was read completely.
bool DownstreamSession::end_delivery(Exchange& x, Endpoint& ep, bool reusable) {
  if (x.body_failure != FailureKind::none)
    report_attempt(*x.upstream, ep, worker_.index, Failure::of(x.body_failure));
  up_.deliver_done(ep, reusable, x.origin_idle_timeout);
  return x.client_keep_alive && x.request_done;
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

// The client's head with the edits spliced in, for this attempt's server (write_request_head()).
std::string_view DownstreamSession::forward_head() {
  write_request_head(*x_);
  return head_out_;
}

// No body, or the whole body kept in relay_: one write, repeatable on a retry. A body still to
// be read from the client streams: Content-Length bodies as they are, chunked bodies validated
// chunk by chunk by chunked_ and re-encoded, so that what the origin sees is exactly what we
// validated.
RequestBody DownstreamSession::request_body() {
  auto& x = *x_;
  if (!x.body_kept && (!x.request_done || x.chunked_in)) {
    x.content_left = x.chunked_in ? 0 : request_->content_length().value_or(0);
    return {.kept = {}, .streamed = true, .chunked = x.chunked_in, .done = x.request_done};
  }
  return {.kept = {relay_, x.body_kept ? x.kept_body : 0}};
}

// Resending on a new connection cannot duplicate work when the request is idempotent and its body
// (if any) is still at hand.
bool DownstreamSession::resendable() const {
  return http::is_idempotent(request_->verb()) && x_->replayable();
}

bool DownstreamSession::accepts_switch(const http::ResponseHead& head) const {
  return http::valid_switch(head, *request_);
}

// A Content-Length piece that came with the head is consumed once it is written.
void DownstreamSession::piece_sent(std::string_view piece) {
  auto& x = *x_;
  if (!x.chunked_in && !piece.empty() && piece.data() == view(in_).data()) {
    in_.consume(piece.size());
    x.body_consumed = true;
  }
}

void DownstreamSession::cancel_read() {
  error_code ignored;
  client_.cancel(ignored);
}

}  // namespace sluice::proxy
