// An HTTP/2 stream forwarded to an h2c or h2 upstream: the request's head as sluice forwards it
// (hop-by-hop fields dropped, X-Forwarded-*, the route's rules) turned into HTTP/2 fields on a
// connection the worker shares among its requests (h2_upstream.hpp); the body handed on as the
// client sends it (full duplex, for gRPC's streaming calls); the answer's head spliced as an
// origin's (X-Request-Id, Date, the route's response rules), its DATA relayed under both sides'
// flow control, its trailers passed on.
#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>
#include "sluice/proxy/h2_session.hpp"
#include "sluice/proxy/h2_stream.hpp"
#include "sluice/upstream/upstream.hpp"

namespace sluice::proxy {

namespace net = boost::asio;

bool Http2Stream::to_h2() const noexcept {
  return upstream_ != nullptr && upstream_->config().protocol != config::UpstreamProtocol::http1;
}

// One try: a connection with room for the call, the request opened as a stream on it, its body
// handed on (a whole one at once, a streamed one by upload_h2()), then the answer's head awaited
// within the try's time.
net::awaitable<Failure> Http2Stream::attempt_h2(Endpoint& ep, Clock::time_point try_until) {
  while (uploading_) {  // a previous try's upload sees its call reset, and ends
    wake_.expires_at(net::steady_timer::time_point::max());
    co_await wake_.async_wait(net::as_tuple(net::use_awaitable));
  }
  upload_stalled_ = false;
  const auto window = snapshot_->config->server.http2_initial_window_bytes;
  if (auto f = co_await h2_.connect(*upstream_, ep, try_until, window); f.failed()) co_return f;
  record_.upstream_ready = worker_.clock.now();
  const bool tls = upstream_->config().protocol == config::UpstreamProtocol::h2;
  if (!h2_.request_fields(forward_head(), tls, request_->value("te").find("trailers") != std::string_view::npos))
    co_return Failure::of(FailureKind::bad_response, "request not expressible in HTTP/2");
  const bool has_body = streamed_ || !body_.empty();
  if (!h2_.open(has_body, &request_trailers_, snapshot_->config->server.max_header_bytes))
    co_return Failure::of(FailureKind::reset_before_send, "upstream HTTP/2 connection refused the stream");
  if (streamed_) {
    uploading_ = true;
    net::co_spawn(worker_.io, upload_h2(h2_.shared_call()), net::detached);
  } else if (has_body) {
    h2_.call()->offer(body_, true);
  }
  auto f = co_await h2_.head(try_until, record_.first_byte);
  // The upload reset the stream: the server took none of the body for send_timeout.
  if (upload_stalled_ && f.failed()) {
    f = Failure::of(FailureKind::send_timeout);
    f.request_bytes_sent = true;
  }
  co_return f;
}

// A streamed body: each piece the client sends handed to the upstream stream; the client's
// window opens once nghttp2 took it (piece_sent()). Ends with the body, the call, or the client;
// or with a server that took nothing within send_timeout (its window stayed shut): the stream is
// reset and the try is a send_timeout.
net::awaitable<void> Http2Stream::upload_h2(std::shared_ptr<H2Call> call) {
  std::string piece;  // the relay block is the answer's: both run at once
  piece.reserve(relay_block_size);
  if (!replay_.empty() && !co_await replay_h2(*call)) {
    uploading_ = false;
    wake_.cancel();
    co_return;
  }
  for (bool last = false; !last;) {
    while (body_.empty() && !request_done_ && !closed_ && !bad_ && !too_large_ && !call->closed()) {
      body_wake_.expires_at(net::steady_timer::time_point::max());
      co_await body_wake_.async_wait(net::as_tuple(net::use_awaitable));
    }
    if (closed_ || bad_ || too_large_ || call->closed()) break;
    const auto n = std::min(body_.size(), relay_block_size);
    piece.assign(body_.data(), n);
    body_.erase(0, n);
    body_consumed_ = true;
    last = request_done_ && body_.empty();
    keep_for_replay(piece);
    call->offer(piece, last);
    const auto until = worker_.clock.now() + Clock::duration(upstream_->config().send_timeout);
    while (!call->upload_taken() && !call->closed() && !closed_ && !upload_stalled_)
      upload_stalled_ = co_await call->wait_upload_until(until);
    if (upload_stalled_) call->reset(NGHTTP2_CANCEL);
    if (call->closed() || closed_) break;
    piece_sent(piece);
  }
  if (!call->closed() && (closed_ || bad_ || too_large_)) call->reset(NGHTTP2_CANCEL);
  uploading_ = false;
  wake_.cancel();
}

void Http2Stream::keep_for_replay(std::string_view piece) {
  if (replay_cut_ || replay_.size() + piece.size() > upstream_->config().retry.buffer) {
    replay_cut_ = true;
    replay_ = std::string();
    return;
  }
  replay_.append(piece);
}

// A retry of a streamed body: what went to the server before is sent again first (the client's
// window for it was opened already). False: the call or the client ended meanwhile.
net::awaitable<bool> Http2Stream::replay_h2(H2Call& call) {
  const bool last = request_done_ && body_.empty();
  call.offer(replay_, last);
  while (!call.upload_taken() && !call.closed() && !closed_) co_await call.wait_upload();
  co_return !call.closed() && !closed_ && !last;
}

// The answer's head: written as HTTP/1.1 and indexed, so that the route's response rules and
// sluice's own fields apply as to an origin's answer, then framed as HEADERS; the body and the
// trailers follow (relay_h2_body()).
net::awaitable<bool> Http2Stream::respond_h2() {
  auto& call = *h2_.call();
  if (h2_response_ == nullptr)
    h2_response_ = new (arena_.allocate(sizeof(http::ResponseHead), alignof(http::ResponseHead))) http::ResponseHead;
  if (!h2_.answer_head(*h2_response_, false)) {
    body_failure_ = FailureKind::bad_response;
    cut(NGHTTP2_INTERNAL_ERROR);
    co_return false;
  }
  const auto& res = *h2_response_;
  const bool is_head = request_->verb() == boost::beast::http::verb::head;
  const auto plan = http::plan_response(res, is_head, 11, true);
  status_ = call.status();
  splice_answer(res, plan, {});  // an h2/h2c server's answer is passed on as it is
  const bool trailers_only = call.ended() && call.pending().empty() && call.trailers().empty();
  if (idem_) idem_->capture_head(res, record_.attempts);
  if (!submit_head(head_out_, !trailers_only && !is_head)) co_return false;
  const bool whole = trailers_only || is_head || co_await relay_h2_body();
  if (whole && idem_) idem_->capture_end();
  if (whole && grpc_) note_grpc_status(call);
  co_return whole;
}

// The call's outcome as the server gave it: grpc-status in its trailers, or in its head for a
// trailers-only answer.
void Http2Stream::note_grpc_status(const H2Call& call) {
  for (const auto* fields : {&call.trailers(), &call.fields()})
    for (const auto& f : *fields)
      if (f.name == "grpc-status") {
        grpc_status_.assign(f.value);
        return;
      }
}

// The answer's DATA, as it comes, one relay block at a time: each piece handed to the client's
// stream, and only then taken from the call (the server's window opens by as much). The end of
// the stream carries the server's trailers. A stream the server reset, or a connection lost,
// before the end resets the client's (INTERNAL_ERROR): it must not take the answer as whole.
net::awaitable<bool> Http2Stream::relay_h2_body() {
  auto& call = *h2_.call();
  if (relay_ == nullptr) relay_ = worker_.relay_blocks.acquire();
  const auto response_timeout = upstream_->config().response_timeout;
  for (;;) {
    arm(response_timeout);
    deadline = std::min(deadline, call_deadline_);
    while (call.pending().empty() && !call.ended() && !call.closed() && !closed_ && !timed_out_) co_await call.wait();
    if (closed_) {
      client_gone();
      co_return false;
    }
    if (call.pending().empty() && !call.ended()) {
      body_failure_ = timed_out_ ? FailureKind::response_timeout : FailureKind::reset_after_send;
      cut(NGHTTP2_INTERNAL_ERROR);
      co_return false;
    }
    const auto n = std::min(call.pending().size(), relay_block_size);
    std::memcpy(relay_, call.pending().data(), n);
    const bool last = call.ended() && n == call.pending().size();
    if (last && !call.trailers().empty()) trailers_out_ = &call.trailers();
    // The last DATA closes the stream once it went: not the client gone.
    const bool taken = co_await offer({relay_, n}, last);
    if (!taken && !(last && eof_sent_)) {
      client_gone();
      co_return false;
    }
    if (idem_) idem_->capture_body({relay_, n});
    call.take(n);
    if (last) co_return true;
  }
}

// The server's trailers on the client's stream, after its last DATA (read_body()).
void Http2Stream::submit_trailers() {
  std::vector<nghttp2_nv> nv;
  nv.reserve(trailers_out_->size());
  for (const auto& f : *trailers_out_) {
    if (connection_specific_field(f.name)) continue;
    nv.push_back(h2_field(f.name, f.value));
  }
  trailers_out_ = nullptr;
  nghttp2_submit_trailer(session_.native(), id_, nv.data(), nv.size());
}

}  // namespace sluice::proxy
