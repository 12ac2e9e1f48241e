// Full-duplex attempts (upload.hpp): a streamed request body and the origin's response head at
// the same time, as two coroutines on the worker's thread. The upload (stream_request(), in
// session.cpp) forwards the body; the response side reads the head meanwhile, so that an origin
// answering before it read the body (413 + close) is heard before its reset. Timing: the body is
// bounded by send_timeout without progress, the answer by the attempt's time counted from the
// last request byte.
#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_suffix.hpp>

#include "sluice/proxy/session.hpp"

namespace sluice::proxy {

namespace net = boost::asio;
namespace beast = boost::beast;
using boost::system::error_code;

namespace {
constexpr auto nothrow = net::as_tuple(net::use_awaitable);
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

net::awaitable<FailureKind> Session::send_streamed(Exchange& x, socket_type& upstream,
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

net::awaitable<FailureKind> Session::upload_side(Exchange& x, socket_type& upstream,
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

net::awaitable<FailureKind> Session::response_side(Exchange& x, socket_type& upstream,
                                                   Clock::time_point try_until,
                                                   std::size_t& received) {
  const auto failure = co_await read_response_head(x, upstream, try_until, received);
  // A final answer (or the origin's reset) before the whole body was sent: the rest of the body
  // is not forwarded (RFC 9112 §9.5: a sender seeing such an answer ceases transmitting the body).
  if (upload_->draining) look_at_drain();  // did the origin take every byte before answering?
  if (upload_->sending && !upload_->draining) stop_upload(upstream);
  co_return failure;
}

void Session::stop_upload(socket_type& upstream) {
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
net::awaitable<error_code> Session::write_upstream(socket_type& upstream,
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

bool Session::look_at_drain() {
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

void Session::arm_body_read() {
  if (upload_ == nullptr) {
    expire_after(snapshot_->config->server.idle_timeout);
    return;
  }
  upload_->reading_client = true;
  expire_after(upload_->send_timeout);
}

void Session::arm_response(Clock::time_point try_until) {
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

}  // namespace sluice::proxy
