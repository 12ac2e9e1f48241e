#pragma once
// The upstream side of one request to the servers of an h2c or h2 upstream (h2_upstream.hpp), for
// either kind of client: an HTTP/2 stream (h2_stream.hpp) or an HTTP/1.1 session
// (downstream_session.hpp). Try by try: a connection with room for the call (one of the worker's,
// one being made that the call waits for, or a new one), the request opened as a stream on it, the
// wait for the answer's head, and what the try came to as a Failure. The client side moves the
// request's body (H2Call::offer()) and the answer's (H2Call::take()) at its own pace.
//
// One worker's thread. Every wait ends at the client side's deadline (its SessionLink, whose
// expire() sets `timed_out` and calls wake()) or once the client side is gone (client_gone()).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nghttp2/nghttp2.h>

#include "sluice/core/clock.hpp"
#include "sluice/core/pooled_frame.hpp"
#include "sluice/http/head_index.hpp"
#include "sluice/proxy/failure.hpp"
#include "sluice/proxy/h2_upstream.hpp"
#include "sluice/proxy/worker_context.hpp"

namespace sluice::proxy {

class H2Exchange {
public:
  H2Exchange(WorkerContext& worker, SessionLink& link, bool& timed_out) noexcept
      : worker_(worker), link_(link), timed_out_(timed_out) {}
  ~H2Exchange() { end(); }
  H2Exchange(const H2Exchange&) = delete;
  H2Exchange& operator=(const H2Exchange&) = delete;

  // A connection to `ep` with room for one more stream, within the upstream's connect_timeout and
  // `try_until`; `window`: the answer's stream window (what the call may hold of it).
  boost::asio::awaitable<Failure> connect(const Upstream& upstream, Endpoint& ep, Clock::time_point try_until,
                                          std::uint32_t window);
  // The request head as sluice forwards it (HTTP/1.1) as the fields it goes with
  // (h2_request_fields()), for an h2 (`tls`) or h2c server. False: not expressible in HTTP/2.
  bool request_fields(std::string_view head, bool tls, bool te_trailers);
  // The request opened as a stream on the connection connect() found: its fields, `trailers` to
  // end its body with (or null; they must outlive the call), a body to come when `has_body`; the
  // answer's head (and its trailers) within `max_head` bytes (a larger one is a bad response).
  // False: the connection could not take it.
  bool open(bool has_body, const std::vector<H2Field>* trailers, std::size_t max_head);
  // Waits for the answer's final head until `try_until`: the try's outcome (answered: kind none,
  // its status, `first_byte` set; a stream the server never processed: reset_before_send, which
  // may go again).
  boost::asio::awaitable<Failure> head(Clock::time_point try_until, Clock::time_point& first_byte);
  // The answer's head written as HTTP/1.1 and indexed into `out`, so that the route's response
  // rules and sluice's own fields apply as to an origin's answer. `mark_chunked`: a body with no
  // content-length is marked chunked (an HTTP/1.1 client's framing of it). False: not a head
  // sluice can pass on. The index points into this exchange until the next try.
  bool answer_head(http::ResponseHead& out, bool mark_chunked);

  H2Call* call() const noexcept { return call_.get(); }
  const std::shared_ptr<H2Call>& shared_call() const noexcept { return call_; }
  std::string_view retry_after() const noexcept;
  // The call is over for this request (answered, dropped for a retry, or the request ended): a
  // stream still open upstream is reset (CANCEL), so that the server stops working on it.
  void end() noexcept;
  // Every wait looks at its state again: a connection being made is cancelled, one waited for and
  // the call are woken.
  void wake() noexcept;
  void client_gone() noexcept {
    gone_ = true;
    wake();
  }

private:
  Failure outcome() const;

  WorkerContext& worker_;
  SessionLink& link_;
  bool& timed_out_;
  std::shared_ptr<H2Connection> conn_;  // connect()'s, until open()
  std::shared_ptr<H2Call> call_;
  tls::Stream* connecting_ = nullptr;  // the socket while a new connection is made
  H2Connection* waiting_ = nullptr;    // a connection being made that the call waits for
  bool gone_ = false;
  // The request's fields (their lowercased names in text_), then the answer's head as HTTP/1.1.
  std::string text_;
  std::vector<nghttp2_nv> fields_;
};

}  // namespace sluice::proxy

SLUICE_POOLED_COROUTINES(sluice::proxy::H2Exchange);
