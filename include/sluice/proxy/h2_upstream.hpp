#pragma once
// HTTP/2 towards the servers of an upstream with `protocol = "h2c"` or `"h2"` (docs/http2.md):
// nghttp2's client session over one connection (H2Connection), with no frame or HPACK code of our
// own. A connection carries many requests at once, each an H2Call, up to the server's
// SETTINGS_MAX_CONCURRENT_STREAMS; H2Connections (one list per server per worker) hands out the
// first with room, and a new connection is made only when all are full.
//
// Flow control is manual (nghttp2's automatic window updates are off): the server's DATA waits in
// the call until the client side took it (H2Call::take()), which opens the stream's window by as
// much, so that a call holds at most its window of the answer in sluice.
//
// A connection with no call for half its idle time is checked with one PING: unanswered within
// the ping timeout, the server (or the path to it) is gone and the connection closes, so that no
// request is sent into it. While the PING is out the connection takes no new call. One PING per
// idle spell: servers that count PINGs without streams as abuse (gRPC's ping strikes) see at most
// one between two calls.
//
// One worker's thread. A connection lives while a call or its own loops hold it (shared
// ownership); a call outliving its connection sees it closed.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nghttp2/nghttp2.h>

#include "sluice/config/config.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/core/pooled_frame.hpp"
#include "sluice/http/h2_frames.hpp"
#include "sluice/proxy/failure.hpp"
#include "sluice/tls/stream.hpp"

namespace sluice {
class Endpoint;
class Upstream;
}  // namespace sluice

namespace sluice::proxy {

class H2Connection;

struct H2Field {
  std::string name, value;
};

// One request stream on an upstream connection.
class H2Call {
public:
  explicit H2Call(boost::asio::any_io_executor executor) : wake_(executor), upload_wake_(executor) {}
  ~H2Call() { reset(NGHTTP2_CANCEL); }
  H2Call(const H2Call&) = delete;
  H2Call& operator=(const H2Call&) = delete;

  // The request goes out on `conn`: its fields (pseudo-header fields first), and a body to come
  // through offer() when `has_body`. False: the connection could not take it.
  bool open(std::shared_ptr<H2Connection> conn, std::span<const nghttp2_nv> fields, bool has_body);
  // A piece of the request body, handed to nghttp2; upload_taken() once it went.
  void offer(std::string_view piece, bool last);
  // Trailers to end the request with, after its last piece (they must outlive the call's upload).
  void trailers_after(const std::vector<H2Field>* trailers) noexcept { out_trailers_ = trailers; }
  // The answer's head, and its trailers, each within `bytes` (as HTTP/1.1 would write them: name,
  // ": ", value, CRLF): a larger one resets the stream (head_too_large()). 0: no bound.
  void limit_head(std::size_t bytes) noexcept { head_limit_ = bytes; }
  bool head_too_large() const noexcept { return head_too_large_; }
  bool upload_taken() const noexcept { return out_.empty() && (!out_last_ || out_eof_); }
  // The client side is done with the stream before its end (the client reset it, a failure):
  // RST_STREAM(`code`), and the call is detached from its connection.
  void reset(std::uint32_t code) noexcept;

  // The answer as it comes.
  bool head_done() const noexcept { return status_ != 0; }
  unsigned status() const noexcept { return status_; }
  const std::vector<H2Field>& fields() const noexcept { return fields_; }
  const std::vector<H2Field>& trailers() const noexcept { return trailers_; }
  std::string_view pending() const noexcept { return body_; }
  // `n` bytes of pending() were handed on: dropped here, and the server's window opens by as much.
  void take(std::size_t n);
  bool ended() const noexcept { return ended_; }    // END_STREAM came (after the pending bytes)
  bool closed() const noexcept { return closed_; }  // the stream is over (ended, reset, or the connection lost)
  // The server refused the stream, or named a last stream below it in GOAWAY: it never
  // processed the request (RFC 9113 §8.7), which may go again whatever its method.
  bool never_processed() const noexcept { return closed_ && !head_done() && close_code_ == NGHTTP2_REFUSED_STREAM; }
  bool sent_any() const noexcept { return opened_; }

  // Waits for the answer's next event (its head, DATA, its end); the upload side waits for its
  // piece to be taken. Either returns at once when woken (cancel()) meanwhile.
  boost::asio::awaitable<void> wait();
  boost::asio::awaitable<void> wait_upload();
  // The same, bounded: true when `until` passed first.
  boost::asio::awaitable<bool> wait_upload_until(Clock::time_point until);
  void wake() noexcept {
    wake_.cancel();
    upload_wake_.cancel();
  }

  // The connection's events. on_header(): false when the field takes the head past its bound.
  bool on_header(std::string_view name, std::string_view value, bool trailer);
  void on_head_end(bool end_stream);
  void on_data(std::string_view data);
  void on_end() noexcept;
  void on_close(std::uint32_t code) noexcept;
  ssize_t read_upload(std::uint8_t* buf, std::size_t length, std::uint32_t* flags);

private:
  std::shared_ptr<H2Connection> conn_;
  std::int32_t id_ = 0;
  bool opened_ = false, ended_ = false, closed_ = false, out_last_ = false, out_eof_ = false;
  bool interim_ = false;  // the head being read is a 1xx
  bool head_too_large_ = false;
  std::size_t head_limit_ = 0, head_bytes_ = 0;  // the bound, and the head (or trailers) so far
  std::uint32_t close_code_ = 0;
  unsigned status_ = 0;
  std::vector<H2Field> fields_, trailers_;
  std::string body_;
  std::string_view out_;
  const std::vector<H2Field>* out_trailers_ = nullptr;
  boost::asio::steady_timer wake_, upload_wake_;
};

class H2Connection : public std::enable_shared_from_this<H2Connection> {
public:
  // A connection still to be made (connect_h2() on stream(), then connected()): calls that find
  // it meanwhile wait for it (wait_ready()) rather than open one each. Idle for `idle_timeout` it
  // closes; its PING must be answered within `ping_timeout`.
  H2Connection(boost::asio::any_io_executor executor, std::shared_ptr<Endpoint> endpoint,
               Clock::duration idle_timeout, Clock::duration ping_timeout, std::uint32_t window);
  ~H2Connection();
  H2Connection(const H2Connection&) = delete;
  H2Connection& operator=(const H2Connection&) = delete;

  tls::Stream& stream() noexcept { return stream_; }
  // The connection was made (the session, our SETTINGS, its reader and writer start), or could
  // not be (`failure`): the calls waiting for it are woken.
  void connected(const Failure& failure);
  bool connecting() const noexcept { return connecting_; }
  // A call waiting for the connection holds a place on it (reserve()) until it opened its stream
  // or gave up (release()). failure(): why the connection could not be made.
  void reserve() noexcept { ++reserved_; }
  void release() noexcept { --reserved_; }
  boost::asio::awaitable<void> wait_ready();
  void wake_waiters() noexcept { ready_wake_.cancel(); }
  const Failure& failure() const noexcept { return failure_; }
  std::uint32_t endpoint_id() const noexcept { return endpoint_id_; }
  // The server's own connection count (Endpoint::h2_connections()) left when the connection is.
  void uncount() noexcept;
  // Alive, not told to go away, and below the server's SETTINGS_MAX_CONCURRENT_STREAMS.
  bool has_room() const noexcept;
  bool alive() const noexcept { return !dead_ && !goaway_; }
  std::size_t open_calls() const noexcept { return calls_.size(); }

  // For the calls.
  std::int32_t submit(H2Call& call, std::span<const nghttp2_nv> fields, bool has_body);
  void forget(H2Call& call, std::int32_t id, std::uint32_t reset_code) noexcept;
  void consume(std::int32_t id, std::size_t n);
  void resume(std::int32_t id);
  void want_write() noexcept;
  nghttp2_session* native() noexcept { return session_; }

  // nghttp2's callbacks.
  int frame_received(const nghttp2_frame& frame);
  int stream_closed(std::int32_t id, std::uint32_t code);

private:
  boost::asio::awaitable<void> read_loop(std::shared_ptr<H2Connection> self);
  boost::asio::awaitable<void> write_loop(std::shared_ptr<H2Connection> self);
  void start();
  void fail_all() noexcept;
  // The writer's wait with nothing to write: the idle spell's steps (its PING, its end). False:
  // the connection is to close.
  boost::asio::awaitable<bool> wait_idle();

  tls::Stream stream_;
  std::shared_ptr<Endpoint> endpoint_;  // its counts; kept alive while the connection is
  std::uint32_t endpoint_id_;
  Clock::duration idle_timeout_, ping_timeout_;
  std::uint32_t window_;
  nghttp2_session* session_ = nullptr;
  std::vector<H2Call*> calls_;
  std::string out_;
  boost::asio::steady_timer write_wake_, ready_wake_;
  Failure failure_;
  unsigned reserved_ = 0;
  bool connecting_ = true, dead_ = false, goaway_ = false, writing_ = false;
  bool counted_ = false;  // in the server's h2_connections()
  // This idle spell's PING went out; its ACK has not come yet.
  bool pinged_ = false, ping_out_ = false;
};

// A worker's HTTP/2 connections to servers, by endpoint id.
class H2Connections {
public:
  // A connection to `ep` with room for one more stream, or null.
  std::shared_ptr<H2Connection> find(const Endpoint& ep);
  void add(const Endpoint& ep, std::shared_ptr<H2Connection> conn);
  // Open connections to `ep` (for tests and metrics).
  std::size_t count(const Endpoint& ep) const;

private:
  std::vector<std::vector<std::shared_ptr<H2Connection>>> by_endpoint_;
};

// The nghttp2 helpers both sides share (http/h2_frames.hpp).
using http::ascii_lower;
using http::connection_specific_field;
using http::gather_h2_frames;
using http::H2Side;
using http::h2_field;
using http::new_h2_session;

// An HTTP/1.1 request head as sluice forwards it (request line, fields, empty line) as HTTP/2
// fields (RFC 9113 §8.3.1): :method, :scheme (`scheme`), :authority from Host, :path, then the
// fields with lowercase names minus the connection-specific ones (§8.2.2) and Host; `te:
// trailers` when `te_trailers` (the client takes trailers, as gRPC needs). `text` holds the
// lowercased names the fields point into; false: the head is not one sluice wrote.
bool h2_request_fields(std::string_view head, std::string_view scheme, bool te_trailers, std::string& text,
                       std::vector<nghttp2_nv>& out);

// A new HTTP/2 connection to `ep`: TCP, then TLS with ALPN h2 for protocol h2 (the upstream's
// TLS settings, the certificate verified as for HTTP/1.1), within `until`. `stream` is the
// socket while it connects (so that the caller's deadline can cancel it). The failure when it
// could not be made.
boost::asio::awaitable<Failure> connect_h2(const Upstream& upstream, Endpoint& ep, tls::Stream& stream);

}  // namespace sluice::proxy

// A call's waits and a connection's loops: frames from the worker's FramePool.
SLUICE_POOLED_COROUTINES(sluice::proxy::H2Call);
SLUICE_POOLED_COROUTINES(sluice::proxy::H2Connection);
