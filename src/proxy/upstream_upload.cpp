// A streamed request body: the attempt is full duplex (upload.hpp), the body and the origin's
// response head at the same time, as two coroutines on the worker's thread. The upload
// (stream_request_body(), request_relay.hpp) forwards the pieces the client side reads; the
// response side reads the head meanwhile, so that an origin answering before it read the body
// (413 + close) is heard before its reset. Timing: the body is bounded by send_timeout without
// progress, the answer by the attempt's time counted from the last request byte.
#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_suffix.hpp>

#include "sluice/proxy/upstream_attempt.hpp"
#include "sluice/proxy/upstream_exchange.hpp"

namespace sluice::proxy {

namespace net = boost::asio;
namespace beast = boost::beast;
using boost::system::error_code;

namespace {
constexpr auto nothrow = net::as_tuple(net::use_awaitable);
// How often the socket buffer is looked at while waiting for the origin (one ioctl per look).
constexpr std::chrono::milliseconds drain_look{50};
}  // namespace

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

net::awaitable<FailureKind> UpstreamExchange::send_streamed(ClientSide& client, tls::Stream& upstream,
                                                            std::string_view head, RequestBody body,
                                                            Clock::time_point try_until,
                                                            std::uint64_t& sent, std::size_t& received) {
  using namespace net::experimental::awaitable_operators;
  const auto now = worker_.clock.now();
  UploadState state;
  state.send_timeout = upstream_->config().send_timeout;
  state.response_budget = try_until > now ? try_until - now : Clock::duration::zero();
  upload_ = &state;
  // `&&` waits for both sides (neither throws): each stops the other when it must (upload.hpp).
  const auto [upload, answer] = co_await (upload_side(client, upstream, head, body, sent) &&
                                          response_side(client, upstream, try_until, received));
  upload_ = nullptr;
  request_unsent_ = !state.fully_sent;
  co_return upload_outcome(state, upload, answer, sent);
}

// stream_request_body()'s hooks (request_relay.hpp) for one streamed attempt: the body's pieces
// as the client side reads them, writes under the upload's deadlines (write()), and the upload's
// state (upload_, shared with the response side).
struct UpstreamExchange::UploadHooks {
  UpstreamExchange& u;
  ClientSide& client;
  std::uint64_t& sent_bytes;  // the attempt's count of request bytes written

  net::awaitable<UploadPiece> next() { return client.next_piece(); }
  net::awaitable<error_code> write(tls::Stream& upstream, std::span<const net::const_buffer> out) {
    return u.write(upstream, out, sent_bytes);
  }
  bool stopped() const { return u.upload_->stop; }
  FailureKind write_failed() {
    auto& up = *u.upload_;
    if (up.stopped()) return FailureKind::none;
    up.send_failed(u.worker_.clock.now());
    if (up.stall == UploadState::Stall::origin) return FailureKind::send_timeout;
    u.arm_response({});  // the origin may still have said why
    return sent_bytes == 0 ? FailureKind::reset_before_send : FailureKind::reset_after_send;
  }
  void sent(std::string_view piece) { client.piece_sent(piece); }
  // Every byte is written; the response deadline starts once the origin took them all.
  void all_sent() {
    auto& up = *u.upload_;
    up.draining = true;
    up.wrote(u.worker_.clock.now());
    u.timed_out_ = false;
    u.look_at_drain();
  }
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<FailureKind>, UploadHooks, tls::Stream&,
                                                     std::string_view, bool, bool>::promise_type,
                               PooledFrame<FailureKind>>);
};

net::awaitable<FailureKind> UpstreamExchange::upload_side(ClientSide& client, tls::Stream& upstream,
                                                          std::string_view head, RequestBody body,
                                                          std::uint64_t& sent) {
  const auto failure = co_await stream_request_body(UploadHooks{*this, client, sent}, upstream, head,
                                                    body.chunked, body.done);
  if (failure == FailureKind::client_failed) {
    // Nothing to relay to a client that failed: the response side stops reading.
    upload_->sending = false;
    upload_->client_failed = true;
    error_code ignored;
    upstream.cancel(ignored);
  }
  co_return failure;
}

net::awaitable<FailureKind> UpstreamExchange::response_side(ClientSide& client, tls::Stream& upstream,
                                                            Clock::time_point try_until,
                                                            std::size_t& received) {
  const auto failure = co_await read_head(client, upstream, try_until, received);
  // A final answer (or the origin's reset) before the whole body was sent: the rest of the body
  // is not forwarded (RFC 9112 §9.5: a sender seeing such an answer ceases transmitting the body).
  if (upload_->draining) look_at_drain();  // did the origin take every byte before answering?
  if (upload_->sending && !upload_->draining) stop_upload(client, upstream);
  co_return failure;
}

// Stops the upload's pending read or write (the response side finished first).
void UpstreamExchange::stop_upload(ClientSide& client, tls::Stream& upstream) {
  upload_->stop = true;
  if (upload_->reading_client) {
    client.cancel_read();
  } else {
    error_code ignored;
    upstream.cancel(ignored);
  }
}

// Writes `out` to the origin step by step: each step, and each look (look_at_drain()) finding
// fewer bytes queued in the socket, is progress, so a slow but steady reader is never cut, a
// stopped one is after send_timeout.
net::awaitable<error_code> UpstreamExchange::write(tls::Stream& upstream, std::span<const net::const_buffer> out,
                                                   std::uint64_t& sent) {
  beast::buffers_suffix<std::span<const net::const_buffer>> rest(out);
  while (beast::buffer_bytes(rest) != 0) {
    const auto now = worker_.clock.now();
    upload_->wrote(now);
    expire_at(now + std::min<Clock::duration>(drain_look, upload_->send_timeout));
    auto [ec, n] = co_await upstream.async_write_some(rest, nothrow);
    rest.consume(n);
    sent += n;
    if (ec) co_return timed(ec);
  }
  co_return error_code{};
}

bool UpstreamExchange::look_at_drain() {
  int queued = 0;  // a failed look counts as drained: the response deadline then runs
  if (active_ != nullptr) ::ioctl(active_->socket().native_handle(), SIOCOUTQ, &queued);
  const auto now = worker_.clock.now();
  switch (upload_->drain_step(static_cast<std::size_t>(std::max(queued, 0)), now)) {
    case UploadState::Drain::done:
      link_.deadline = upload_->response_until;
      return true;
    case UploadState::Drain::progressing:
      link_.deadline = now + std::min<Clock::duration>(drain_look, upload_->send_timeout);
      return true;
    case UploadState::Drain::stalled: break;
  }
  return false;
}

bool UpstreamExchange::upload_progressing() {
  if (upload_ == nullptr) return false;
  if (upload_->sending && !upload_->reading_client && look_at_drain()) return true;
  upload_->expired();
  return false;
}

void UpstreamExchange::arm_body_read(Clock::duration idle) noexcept {
  if (upload_ == nullptr) {
    expire_at(worker_.clock.now() + idle);
    return;
  }
  upload_->reading_client = true;
  expire_at(worker_.clock.now() + upload_->send_timeout);
}

void UpstreamExchange::arm_response(Clock::time_point try_until) noexcept {
  timed_out_ = false;
  if (upload_ == nullptr) {
    link_.deadline = try_until;
  } else if (upload_->sending) {
    // The upload's own bound again (an interim answer's write to the client replaced it): the
    // client's idle time, or the next look at what the origin took.
    link_.deadline = worker_.clock.now() + (upload_->reading_client
                                                ? upload_->send_timeout
                                                : std::min<Clock::duration>(drain_look, upload_->send_timeout));
  } else {
    link_.deadline = upload_->response_until;
  }
}

}  // namespace sluice::proxy
