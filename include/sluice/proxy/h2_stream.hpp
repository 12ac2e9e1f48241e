#pragma once
// One request stream of an HTTP/2 client connection (h2_session.hpp). nghttp2 validates the
// frames and the fields (RFC 9113 §8: pseudo-headers once and first, no connection-specific
// fields, `te` only "trailers", no uppercase names, no CR/LF/NUL, content-length against the
// DATA); the stream adds its own rules (§8.3.1: :authority and Host agree; CONNECT refused; the
// head and body bounds) and writes the request as an HTTP/1.1 head, which the strict HTTP/1.1
// index (http/head_index.hpp) reads like any client's: routing, admission, header rules and the
// head sent to the origin are the HTTP/1.1 session's own, so the downgrade adds no way to smuggle.
// The body is buffered whole before the first attempt (with its length, so the origin sees a
// Content-Length request); the stream then drives the Forwarder (forward_attempts()) and an
// UpstreamExchange through ClientSide, and relays the origin's answer as HEADERS and DATA frames.
//
// One worker's thread. Owned by its Http2Session, which deletes it once both its coroutine
// (run()) has ended and nghttp2 has closed it.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nghttp2/nghttp2.h>

#include "sluice/compress/eligibility.hpp"
#include "sluice/compress/encoder.hpp"
#include "sluice/core/arena.hpp"
#include "sluice/core/pooled_frame.hpp"
#include "sluice/http/edge_rules.hpp"
#include "sluice/http/head_index.hpp"
#include "sluice/idempotency/guard.hpp"
#include "sluice/proxy/error_response.hpp"
#include "sluice/proxy/forwarder.hpp"
#include "sluice/proxy/h2_exchange.hpp"
#include "sluice/proxy/h2_upstream.hpp"
#include "sluice/proxy/router.hpp"
#include "sluice/proxy/upstream_exchange.hpp"
#include "sluice/proxy/worker_context.hpp"

namespace sluice::proxy {

class Http2Session;

class Http2Stream final : public SessionLink, private ClientSide {
public:
  Http2Stream(Http2Session& session, std::int32_t id);
  ~Http2Stream();
  Http2Stream(const Http2Stream&) = delete;
  Http2Stream& operator=(const Http2Stream&) = delete;
  // One per request: from the thread's block cache (core/block_cache.hpp), not the heap.
  static void* operator new(std::size_t size);
  static void operator delete(void* p) noexcept;

  std::int32_t id() const noexcept { return id_; }

  // nghttp2's events for this stream (h2_session.cpp's callbacks), in arrival order.
  void on_header(std::string_view name, std::string_view value);
  void on_headers_end(bool end_stream);
  // A field of the request's trailers: kept for an h2/h2c server, dropped for an HTTP/1.1 one.
  void on_trailer(std::string_view name, std::string_view value);
  void on_data(std::string_view data);
  void on_request_end();
  // nghttp2 closed the stream (answered, or reset by either side): an attempt or relay under way
  // stops, and nothing more is sent for it.
  void on_close();
  // The answer's DATA (nghttp2's data provider).
  ssize_t read_body(std::uint8_t* buf, std::size_t length, std::uint32_t* flags);

  // Whether the request is complete enough to be served (or refused) and run() was not started:
  // the session starts it once.
  bool ready() const noexcept { return ready_ && !started_ && !bad_; }
  void begin() noexcept { started_ = true; }
  // nghttp2 reset the stream as malformed (its RST_STREAM queued).
  void invalid();
  bool running() const noexcept { return started_ && !finished_; }
  bool closed() const noexcept { return closed_; }
  // The answer's HEADERS were submitted (a reset before it counts as an early reset).
  bool answered() const noexcept { return answered_; }
  // The stream's whole life as a request: serve, log.
  boost::asio::awaitable<void> run();

  void expire() override;
  void close_if_idle() override {}
  void close() override { on_close(); }
  bool holds_upstream() const noexcept override { return up_.in_use(); }

  struct ForwardHooks;

private:
  // The request head (h2_stream.cpp).
  void begin_head();
  void append_field(std::string_view name, std::string_view value);
  void malformed(const char* why);
  void refuse(ProxyError error);
  void finish_head();
  void consume(std::size_t n);
  boost::asio::awaitable<void> serve();
  ProxyError route_request();
  http::Variables rule_variables(std::span<char, 24> version) const;
  boost::asio::awaitable<void> send_fixed_answer();
  boost::asio::awaitable<void> send_http1_answer(std::string_view answer, std::string_view page);
  boost::asio::awaitable<void> forward();
  // Idempotency-Key (docs/idempotency.md), as for an HTTP/1.1 request: the whole body is waited
  // for (within the stream's window and the relay block), then the key claimed, or the answer
  // given from the store or refused. True: forward the request.
  boost::asio::awaitable<bool> idempotency_gate();
  boost::asio::awaitable<bool> whole_body(std::size_t limit);
  // To an h2c or h2 upstream (h2_stream_upstream.cpp): the request as HTTP/2 on a shared
  // connection, the answer's head, DATA and trailers relayed.
  bool to_h2() const noexcept;
  boost::asio::awaitable<Failure> attempt_h2(Endpoint& ep, Clock::time_point try_until);
  boost::asio::awaitable<void> upload_h2(std::shared_ptr<H2Call> call);
  boost::asio::awaitable<bool> replay_h2(H2Call& call);
  void keep_for_replay(std::string_view piece);
  boost::asio::awaitable<bool> respond_h2();
  boost::asio::awaitable<bool> relay_h2_body();
  void submit_trailers();
  void wake_all() noexcept;
  // An answer's head (an origin's, as HTTP/1.1) spliced into head_out_ as an HTTP/1.1 client's
  // would be: X-Request-Id, Date, the route's response rules.
  void splice_answer(const http::ResponseHead& res, const http::ResponsePlan& plan, const compress::Plan& coding);
  // Whether the answer is compressed (compress::plan(), docs/compression.md), on a route with
  // `compress`: its encoder taken from the worker's pool.
  compress::Plan plan_coding(const http::ResponseHead& res);
  // A piece of the answer's body as it is, or through the encoder (fed, then flushed, or finished
  // with the last piece), each output offered as it comes. False: the client is gone, or the
  // encoder failed (coding_failed_; the stream reset).
  boost::asio::awaitable<bool> offer_body(std::string_view piece, bool last);
  // sluice's own answer to a gRPC call: HTTP 200, the outcome in grpc-status and grpc-message.
  bool submit_grpc_answer(std::string_view http1_answer, unsigned status);
  void note_grpc_status(const H2Call& call);
  // ClientSide (upstream_exchange.hpp).
  std::string_view forward_head() override;
  RequestBody request_body() override;
  bool resendable() const override;
  bool accepts_switch(const http::ResponseHead&) const override { return false; }
  boost::asio::awaitable<InterimFate> interim(const http::ResponseHead&) override;
  boost::asio::awaitable<UploadPiece> next_piece() override;
  void piece_sent(std::string_view piece) override;
  void cancel_read() override {}
  // The answer (h2_response.cpp).
  boost::asio::awaitable<bool> respond();
  std::span<const nghttp2_nv> answer_fields(std::string_view http1_head);
  bool submit_head(std::string_view http1_head, bool has_body);
  boost::asio::awaitable<void> send_error(const ProxyError& error);
  boost::asio::awaitable<bool> relay_body(const http::ResponsePlan& plan);
  boost::asio::awaitable<bool> offer(std::string_view bytes, bool last);
  boost::asio::awaitable<bool> wait_taken();
  boost::asio::awaitable<bool> wait_for(Clock::duration d);
  void cut(std::uint32_t error_code);
  void client_gone();
  void log_exchange();
  AccessRecord access_record(AttemptRecord::ServersText& servers) const;
  void arm(Clock::duration d) noexcept;

  Http2Session& session_;
  WorkerContext& worker_;
  std::int32_t id_;
  std::shared_ptr<const Snapshot> snapshot_;
  // The request as it arrives: pseudo-header fields, then the HTTP/1.1 head written from them
  // and the regular fields, the cookie crumbs joined (RFC 9113 §8.2.3), the body.
  std::string method_, scheme_, authority_, path_, cookie_;
  std::string head_;
  std::string body_;
  std::optional<std::uint64_t> declared_length_;
  bool head_begun_ = false;
  bool ready_ = false, started_ = false, finished_ = false, closed_ = false;
  bool answered_ = false, bad_ = false, request_done_ = false;
  bool grpc_ = false;  // content-type application/grpc*: sluice's own answers are gRPC-shaped
  // A gRPC call's grpc-status as answered (the server's, or sluice's own answer's); "" for none.
  std::string grpc_status_;
  // The body streams (it had not ended when the stream started); bytes of it went to an origin
  // (no replay); it passed max_body_bytes.
  bool streamed_ = false, body_consumed_ = false, too_large_ = false;
  std::uint64_t received_ = 0;  // body bytes received
  ProxyError refused_;
  // The request's index over head_ (in the arena), its route and its record.
  Arena arena_;
  http::RequestHead* request_ = nullptr;
  const Router::Route* route_ = nullptr;
  const Upstream* upstream_ = nullptr;
  std::string client_text_;  // the client address as the request resolves it
  char generated_id_[37];
  std::string_view request_id_;
  AttemptRecord record_;
  std::unique_ptr<idempotency::Ticket> idem_;  // a keyed request on a guarded upstream
  std::optional<Forwarder> forwarder_;
  bool timed_out_ = false;
  UpstreamExchange up_{worker_, *this, timed_out_, arena_};
  // An h2c or h2 upstream's tries (h2_exchange.hpp).
  H2Exchange h2_{worker_, *this, timed_out_};
  std::string head_out_;  // the head to the origin, then the answer's head before it is framed
  // The answer: its fields for nghttp2 (names and values in nv_text_), its body's next piece
  // (out_), where nghttp2 is in it, and whether it is the last.
  std::string nv_text_;
  std::string error_body_;
  std::string_view out_;
  bool out_last_ = false, eof_sent_ = false;
  char* relay_ = nullptr;
  FailureKind body_failure_ = FailureKind::none;  // the origin's body broke off
  compress::Encoder encoder_;  // the answer is compressed
  bool coding_failed_ = false;
  std::optional<std::chrono::seconds> origin_idle_;
  unsigned status_ = 0;
  std::string_view error_;
  std::uint64_t bytes_out_ = 0;
  Clock::time_point start_{};
  boost::asio::steady_timer wake_;
  // A gRPC call's grpc-timeout, from when the stream began: no try and no wait for the answer
  // lasts past it (max: none).
  Clock::time_point call_deadline_ = Clock::time_point::max();
  boost::asio::steady_timer body_wake_;  // the upload's (a streamed body's next DATA)
  bool uploading_ = false;
  bool upload_stalled_ = false;  // the server took none of the streamed body for send_timeout
  // A streamed body's bytes already handed to a server, kept (up to retry.buffer) so that a try
  // the server never processed can be made again; replay_cut_: more went than was kept.
  std::string replay_;
  std::vector<H2Field> request_trailers_;  // within max_header_bytes
  bool replay_cut_ = false;
  // An h2c or h2 upstream's answer head indexed as HTTP/1.1 (for the route's rules), the
  // trailers to pass on.
  http::ResponseHead* h2_response_ = nullptr;
  const std::vector<H2Field>* trailers_out_ = nullptr;
};

}  // namespace sluice::proxy

// A stream's coroutines (its run, the attempt loop's, the upload's, the answer's waits) take their
// frames from the worker's FramePool (core/pooled_frame.hpp), as the HTTP/1.1 session's do.
SLUICE_POOLED_COROUTINES(sluice::proxy::Http2Stream);
SLUICE_POOLED_COROUTINES_TAKING(sluice::proxy::Http2Stream::ForwardHooks);
