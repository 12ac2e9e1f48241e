#pragma once
// The upstream side of one request: an attempt's connection to its server (pooled or new, TLS or
// not), the request sent on it (in one write, or a body streamed in full duplex with the answer),
// the origin's read buffer and its final response head (interim 1xx heads passed on), and each
// failure as a Failure. The Forwarder's loop (forward_attempts(), forwarder.hpp) drives it one
// attempt at a time; what it needs of the side that serves the client (the head as it is
// forwarded, the body's pieces, where an interim head goes) comes through ClientSide, which the
// HTTP/1.1 session implements.
//
// One worker's thread. A session owns one and reuses it for each of its requests; its I/O runs
// under the session's deadline (SessionLink), which the worker's tick enforces.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "sluice/core/arena.hpp"
#include "sluice/core/pooled_frame.hpp"
#include "sluice/http/chunked.hpp"
#include "sluice/http/head_index.hpp"
#include "sluice/proxy/failure.hpp"
#include "sluice/proxy/forwarder.hpp"
#include "sluice/proxy/request_relay.hpp"
#include "sluice/proxy/upload.hpp"
#include "sluice/proxy/worker_context.hpp"
#include "sluice/tls/stream.hpp"
#include "sluice/tls/stream_slot.hpp"

namespace sluice::proxy {

// What an attempt sends after the head: nothing or a body kept whole (one write, repeatable), or
// a body streamed from the client as it comes (ClientSide::next_piece()).
struct RequestBody {
  std::string_view kept;  // the whole body, kept for a replay (may be empty: no body)
  bool streamed = false;
  bool chunked = false;    // streamed and re-chunked as it passes
  bool done = false;       // streamed: nothing more to read from the client
};

// What an upstream exchange asks of the side that serves the client.
// What the client side did with an interim 1xx head.
enum class InterimFate : unsigned char {
  written,      // it reached the client (the write took the deadline: the exchange re-arms its own)
  withheld,     // the client cannot take one (HTTP/1.0): nothing was written
  client_gone,  // the write failed: the client is gone
};

class ClientSide {
public:
  // The request head as it goes to the origin on this attempt (written for its server).
  virtual std::string_view forward_head() = 0;
  virtual RequestBody request_body() = 0;
  // The request can go again on a new connection without duplicating work: an idempotent method,
  // its body (if any) still at hand.
  virtual bool resendable() const = 0;
  // A final 101 that answers the request's upgrade, to a protocol it offered.
  virtual bool accepts_switch(const http::ResponseHead& head) const = 0;
  // An interim 1xx head, passed on to the client if it can take one.
  virtual boost::asio::awaitable<InterimFate> interim(const http::ResponseHead& head) = 0;
  // A streamed body's next piece (its reads, limits and answers to the client are the client
  // side's), or why the upload ends.
  virtual boost::asio::awaitable<UploadPiece> next_piece() = 0;
  // A piece reached the origin (consumed where the client side buffered it).
  virtual void piece_sent(std::string_view piece) = 0;
  // The upload stops while it waits for the client's bytes: that read is cancelled.
  virtual void cancel_read() = 0;

protected:
  ~ClientSide() = default;
};

class UpstreamExchange {
public:
  using HeadBuffer = boost::beast::basic_flat_buffer<PoolAllocator<char>>;

  // `link`: the session whose deadline bounds the exchange's I/O too (its expire() sets
  // `timed_out` when it cancels an operation); `arena`: the exchange memory the response index is
  // placed in.
  UpstreamExchange(WorkerContext& worker, SessionLink& link, bool& timed_out, Arena& arena) noexcept
      : worker_(worker), link_(link), timed_out_(timed_out), arena_(arena) {}
  UpstreamExchange(const UpstreamExchange&) = delete;
  UpstreamExchange& operator=(const UpstreamExchange&) = delete;

  // The origin's read buffer, bounded by a head plus one read (the session's first step).
  void start(std::size_t max_header_bytes, const PoolAllocator<char>& blocks);
  // A request begins its attempts: its upstream, the record of its attempts (upstream_ready and
  // first_byte are set here), its head limit, whether it asks for an upgrade (then it takes a
  // new connection each try, and a 101 may answer it).
  void begin(const Upstream& upstream, AttemptRecord& record, std::size_t max_header_bytes,
             bool upgrade) noexcept {
    upstream_ = &upstream;
    record_ = &record;
    max_header_bytes_ = max_header_bytes;
    upgrade_ = upgrade;
  }

  // One try on `ep` (attempt_server(), upstream_attempt.hpp): a pooled connection unless the
  // request is an upgrade or its TLS does not fit, else a new one. Answered (kind none): the final
  // head is response(), the connection stream(). Not a coroutine.
  boost::asio::awaitable<Failure> attempt(ClientSide& client, Endpoint& ep, Clock::time_point try_until);

  // The final response head in hand, its connection and what was read behind the head.
  const http::ResponseHead& response() const noexcept { return *response_; }
  tls::Stream& stream() noexcept { return *slot_; }
  HeadBuffer& in() noexcept { return in_; }
  // The response's chunked body decoder (the response relay's).
  http::ChunkedDecoder& chunked() noexcept { return chunked_; }
  // The origin answered before the whole request reached it: the connection is mid-message.
  bool request_unsent() const noexcept { return request_unsent_; }
  std::string_view retry_after() const noexcept;

  // After the answer was delivered: the connection to the pool when `reusable` (kept no longer
  // than the origin's own Keep-Alive timeout, `origin_idle`, allows), else closed.
  void deliver_done(Endpoint& ep, bool reusable, std::optional<std::chrono::seconds> origin_idle);
  // The answer of an attempt not delivered: dropped with its connection (its body unread).
  void drop() noexcept;
  // After a 101: the connection goes to the tunnel (with what in() holds, which the caller takes).
  tls::Stream take_stream() noexcept;
  // The response head in hand is dropped (retried, failed, or the exchange ended); end(): with its
  // index's place in the arena, when the exchange ends.
  void forget_response() noexcept { response_ = nullptr; }
  void end() noexcept;
  // The read buffer back to the worker's pool when it holds nothing.
  void release_buffer();

  // The session's deadline passed: true when a streamed upload still makes progress (the
  // deadline moved on), else the upload's stall is noted.
  bool upload_progressing();
  // Cancels or closes the connection in use (connecting, or carrying the request), if any.
  void cancel() noexcept;
  void close() noexcept;
  bool in_use() const noexcept { return active_ != nullptr; }

  // While a streamed body and the response head overlap: their shared state (else nullptr).
  UploadState* upload() const noexcept { return upload_; }
  // A body streamed another way (to an HTTP/2 server) reads the client through the same steps
  // (ClientSide::next_piece()) under `state`'s deadlines; nullptr once it ended.
  void lend_upload(UploadState* state) noexcept { upload_ = state; }
  // The deadline of a client body read while streaming (send_timeout; else `idle`).
  void arm_body_read(Clock::duration idle) noexcept;
  // The client body read returned.
  void body_read_done() noexcept {
    if (upload_ != nullptr) upload_->reading_client = false;
  }

  struct AttemptHooks;
  struct HeadHooks;
  struct UploadHooks;

private:
  boost::asio::awaitable<Failure> connect(Endpoint& ep, tls::StreamSlot& slot, Clock::time_point try_until);
  boost::asio::awaitable<Failure> connect_tls(Endpoint& ep, tls::Stream& stream);
  bool tls_fits(const Endpoint& ep, tls::Stream& pooled) const;
  boost::asio::awaitable<FailureKind> send(ClientSide& client, tls::Stream& upstream, Clock::time_point try_until,
                                           std::uint64_t& sent, std::size_t& received);
  // Full duplex (upstream_upload.cpp): the streamed body and the response head at once.
  boost::asio::awaitable<FailureKind> send_streamed(ClientSide& client, tls::Stream& upstream,
                                                    std::string_view head, RequestBody body, Clock::time_point try_until,
                                                    std::uint64_t& sent, std::size_t& received);
  boost::asio::awaitable<FailureKind> upload_side(ClientSide& client, tls::Stream& upstream,
                                                  std::string_view head, RequestBody body,
                                                  std::uint64_t& sent);
  boost::asio::awaitable<FailureKind> response_side(ClientSide& client, tls::Stream& upstream,
                                                    Clock::time_point try_until, std::size_t& received);
  boost::asio::awaitable<boost::system::error_code> write(tls::Stream& upstream,
                                                          std::span<const boost::asio::const_buffer> out,
                                                          std::uint64_t& sent);
  void stop_upload(ClientSide& client, tls::Stream& upstream);
  // While waiting for the origin to take request bytes: looks at the bytes it has not taken yet
  // (upload.hpp) and sets the deadline of the next look, or of the response. False: it stalled.
  bool look_at_drain();
  // The response head's deadline: try_until, or from the last request byte when streamed.
  void arm_response(Clock::time_point try_until) noexcept;
  boost::asio::awaitable<FailureKind> read_head(ClientSide& client, tls::Stream& upstream,
                                                Clock::time_point try_until, std::size_t& received);
  boost::asio::awaitable<bool> pass_interim(ClientSide& client, const http::ResponseHead& head,
                                            Clock::time_point try_until);
  http::ResponseHead& response_index();
  std::optional<FailureKind> final_head(ClientSide& client, const http::ResponseHead& head) const;
  void expire_at(Clock::time_point t) noexcept {
    link_.deadline = t;
    timed_out_ = false;
  }
  // An operation's error, with a cancellation by the deadline reported as beast::error::timeout.
  boost::system::error_code timed(boost::system::error_code ec) const noexcept {
    return timed_error(ec, timed_out_);
  }

  WorkerContext& worker_;
  SessionLink& link_;
  bool& timed_out_;
  Arena& arena_;
  const Upstream* upstream_ = nullptr;
  AttemptRecord* record_ = nullptr;
  std::size_t max_header_bytes_ = 0;
  bool upgrade_ = false;
  tls::StreamSlot slot_;                  // the attempt's connection
  tls::Stream* active_ = nullptr;         // the connection in use, for cancel() and close()
  // Bytes from the origin not yet relayed. Their memory comes from the worker's block pool and
  // goes back to it whenever they are empty (release_buffer()), so an idle connection holds none.
  HeadBuffer in_;
  // The response head, indexed over its bytes in in_: read_head() consumes them at once, but they
  // stay where they are until in_'s next prepare(), which comes only after the head was answered
  // (spliced by the client side): no copy. response_ is the complete head in hand (nullptr: none);
  // its storage is in the arena, made on the exchange's first head.
  const http::ResponseHead* response_ = nullptr;
  http::ResponseHead* response_store_ = nullptr;
  http::ChunkedDecoder chunked_;
  bool request_unsent_ = false;
  // While a streamed body and the response head overlap: their shared state (on send_streamed()'s
  // frame), for the session's deadline to say whose stall it was.
  UploadState* upload_ = nullptr;
  char tls_failure_[192] = {};  // detail (Sluice-Error) of the last TLS failure
};

}  // namespace sluice::proxy

SLUICE_POOLED_COROUTINES(sluice::proxy::UpstreamExchange);
SLUICE_POOLED_COROUTINES_TAKING(sluice::proxy::UpstreamExchange::AttemptHooks);
SLUICE_POOLED_COROUTINES_TAKING(sluice::proxy::UpstreamExchange::HeadHooks);
SLUICE_POOLED_COROUTINES_TAKING(sluice::proxy::UpstreamExchange::UploadHooks);
