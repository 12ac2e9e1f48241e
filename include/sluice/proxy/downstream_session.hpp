#pragma once
// A downstream (client) connection: reads requests strictly, routes them, forwards each over a
// pooled upstream connection, streams the response back, and loops for keep-alive and pipelining
// (answers leave in request order because one request is handled at a time).
//
// Lives on one worker for its whole life; owned by the coroutine running run(). Not thread-safe:
// only the worker's thread touches it (including close_if_idle()/close() at shutdown).
#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "sluice/compress/eligibility.hpp"
#include "sluice/http/chunked.hpp"
#include "sluice/http/head.hpp"
#include "sluice/http/head_index.hpp"
#include "sluice/http/message.hpp"
#include "sluice/config/fail_on.hpp"
#include "sluice/core/pooled_frame.hpp"
#include "sluice/proxy/admission.hpp"
#include "sluice/proxy/body_relay.hpp"
#include "sluice/proxy/error_response.hpp"
#include "sluice/proxy/failure.hpp"
#include "sluice/proxy/forwarder.hpp"
#include "sluice/proxy/h2_exchange.hpp"
#include "sluice/proxy/h2_session.hpp"
#include "sluice/proxy/parking.hpp"
#include "sluice/proxy/request_head.hpp"
#include "sluice/proxy/request_relay.hpp"
#include "sluice/proxy/retry.hpp"
#include "sluice/proxy/tunnel.hpp"
#include "sluice/proxy/tunnel_session.hpp"
#include "sluice/proxy/upload.hpp"
#include "sluice/proxy/upstream_exchange.hpp"
#include "sluice/proxy/worker_context.hpp"
#include "sluice/tls/context.hpp"
#include "sluice/tls/stream_slot.hpp"
#include "sluice/tls/stream.hpp"

namespace sluice::proxy {

class RouteAdmission;

class DownstreamSession final : public SessionLink, private ClientSide {
public:
  // `tls`: the listener's TLS context when `client` carries TLS (the handshake is run()'s first
  // step); kept for the connection's lifetime, whatever reloads happen meanwhile.
  // `proxy_protocol`: a PROXY protocol header comes first (before TLS), see docs/edge.md.
  // `client_address`: the peer's, as accept() gave it (no getpeername per connection).
  DownstreamSession(WorkerContext& worker, tls::Stream client,
                    const boost::asio::ip::address& client_address,
                    std::shared_ptr<tls::ServerContext> tls = {}, bool proxy_protocol = false);
  ~DownstreamSession();
  DownstreamSession(const DownstreamSession&) = delete;
  DownstreamSession& operator=(const DownstreamSession&) = delete;

  boost::asio::awaitable<void> run();

  void close_if_idle() override;
  void close() override;
  void expire() override;
  bool holds_upstream() const noexcept override { return up_.in_use() || (h2_ != nullptr && h2_->call() != nullptr); }

  // Parking (parking.hpp). parked(): run() ended because the connection had been idle for
  // park_after; take_parked() hands it to the worker's ParkingLot. resumed(): a connection back
  // from the lot (not its first request; constructed with the client address it was parked with).
  bool parked() const noexcept { return parked_; }
  ParkedClient take_parked() noexcept;
  void resumed() noexcept;
  // Upgrade: run() ended after a 101; take_tunnel() hands both streams to a TunnelSession.
  bool tunneled() const noexcept { return tunnel_ != nullptr; }
  std::unique_ptr<TunnelHandoff> take_tunnel() noexcept { return std::move(tunnel_); }
  // HTTP/2: run() ended because the connection speaks it (ALPN h2, or h2c's preface);
  // take_http2() hands it to an Http2Session (h2_session.hpp).
  bool speaks_http2() const noexcept { return http2_ != nullptr; }
  std::unique_ptr<Http2Handoff> take_http2() noexcept { return std::move(http2_); }

  // read_request_head()'s hooks (request_head.hpp) for a client's next head, forward_attempts()'s
  // (forwarder.hpp) for one request and relay_response()'s, defined in the session's files
  // (src/proxy/downstream_*.cpp and downstream_exchange.hpp). Named here, outside `private`, for
  // the FramePool specialisations at the end of this file.
  struct RequestHooks;
  struct ForwardHooks;
  struct H2ForwardHooks;
  struct ResponseHooks;

private:
  void close_streams() noexcept;  // close() without its shutdown first
  // After the last exchange (not parked): the half-close unless the client can send nothing more
  // (`nothing_unread`), then the close.
  void end_connection(bool half_close) noexcept;
  // Before the close of a plain connection whose client may still be sending: half-closes, then
  // reads and discards until the client closes (lingering close).
  boost::asio::awaitable<void> linger();
  struct Exchange;  // per-request state, defined in downstream_session.cpp
  using socket_type = tls::Stream;  // plain TCP or TLS, both sides
  using error_code_type = boost::system::error_code;

  // The TLS handshake of a TLS listener's connection, in downstream_tls.cpp.
  boost::asio::awaitable<bool> tls_handshake();
  // Edge steps, in downstream_edge.cpp: the PROXY protocol header, the request's client address,
  // the route's allow/deny and rate limit (a ProxyError with status 0 lets the request in).
  boost::asio::awaitable<bool> read_proxy_header();
  ClientAddress client_of(const http::RequestHead& req) const noexcept;
  ProxyError admit(const RouteAdmission* admission, const http::RequestHead& req,
                   std::string_view target, const ClientAddress& client) const noexcept;
  struct HeadLimits {
    Clock::duration header_timeout, idle_timeout;
    std::size_t max_header_bytes, max_uri_bytes;
  };
  HeadLimits head_limits() const noexcept;
  std::optional<HeadResult> look_at_head(const HeadLimits& limits, ProxyError& error);
  HeadResult start_request(const http::HeadVerdict& verdict);
  http::RequestHead& request_index();
  // The connection's requests (proxy::read_request_head() serving them through RequestHooks).
  boost::asio::awaitable<HeadResult> serve_requests(ProxyError& error, bool& nothing_unread,
                                                    std::optional<Exchange>& x);
  HeadLimits begin_head();
  boost::asio::awaitable<bool> handle_request(Exchange& x);
  boost::asio::awaitable<bool> answer_error(Exchange& x, ProxyError error);
  boost::asio::awaitable<bool> forward_prepared(Exchange& x, RequestFacts facts);
  // Towards the attempt loop (forward_attempts(), forwarder.hpp): the request's framing and
  // retry facts, its body kept when it must be (replay, chunked validation) and its
  // Idempotency-Key gate, the balancer's context.
  enum class Prepared { forward, keep, close };  // keep, close: answered, the client's connection
  proxy::RequestFacts begin_forward(Exchange& x);
  bool keeps_content_body(const Exchange& x) const;
  bool prepares_body(const Exchange& x) const;
  boost::asio::awaitable<Prepared> prepare_forward(Exchange& x);
  PickContext pick_context(const Exchange& x) const;
  Forwarder& start_attempts(Exchange& x, RequestFacts facts);
  // ForwardHooks' steps: the end of a delivered answer, a wait (backoff, queue).
  bool end_delivery(Exchange& x, Endpoint& ep, bool reusable);
  boost::asio::awaitable<bool> wait_for(Clock::duration d);
  boost::asio::awaitable<bool> keep_body(Exchange& x);
  boost::asio::awaitable<bool> idempotency_gate(Exchange& x);
  // Chunked request bodies: validated by chunked_ before any of their bytes leave.
  enum class BodyStep { done, some, failed };
  boost::asio::awaitable<bool> send_continue(Exchange& x);
  boost::asio::awaitable<bool> keep_chunked_body(Exchange& x);
  boost::asio::awaitable<BodyStep> decode_chunked(Exchange& x, std::size_t& have, bool flush);
  boost::asio::awaitable<UploadPiece> next_upload_piece(Exchange& x);
  bool body_bytes_now(std::uint64_t content_left, BodyPiece& read);
  bool waits_without_relay() const;
  // The deadline of a client body read (send_timeout while uploading, else idle_timeout).
  void arm_body_read();
  // ClientSide (upstream_exchange.hpp): what the upstream exchange asks of this request.
  std::string_view forward_head() override;
  RequestBody request_body() override;
  bool resendable() const override;
  bool accepts_switch(const http::ResponseHead& head) const override;
  boost::asio::awaitable<InterimFate> interim(const http::ResponseHead& head) override;
  boost::asio::awaitable<UploadPiece> next_piece() override;
  void piece_sent(std::string_view piece) override;
  void cancel_read() override;
  void write_interim_head(const http::ResponseHead& head);
  // The final response to the client: at once when it can go so (relay_at_once(),
  // response_relay.hpp), else through relay_response() (or the rest, finish_at_once()).
  bool respond_at_once(Exchange& x, bool& reusable);
  boost::asio::awaitable<bool> send_response(Exchange& x);
  http::ResponsePlan begin_response(Exchange& x, bool is_head);
  compress::Plan plan_coding(Exchange& x, http::ResponsePlan& plan);
  boost::asio::awaitable<void> body_failed(Exchange& x, boost::system::error_code ec,
                                           bool head_written, FailureKind failure);
  boost::asio::awaitable<void> wait_client_room(std::span<char>& relay, std::span<char>* coded,
                                                boost::system::error_code& ec);
  boost::asio::awaitable<void> coding_failed(Exchange& x, boost::system::error_code ec, bool head_written);
  // After a 101: the answer to the client, then both streams handed over (tunnel_session.hpp).
  boost::asio::awaitable<bool> tunnel(Exchange& x, Endpoint& ep);
  void write_switch_head(Exchange& x);
  void hand_over(Exchange& x, Endpoint& ep);
  boost::asio::awaitable<void> send_error(Exchange* x, const ProxyError& error);
  ErrorStyle error_style(const config::Config& config, const Router::Route* route, unsigned status);
  // Edge rules (docs/edge.md): the heads written with the route's rules, and `return` answers.
  http::Variables rule_variables(const Exchange& x, std::span<char, 24> version) const;
  void write_request_head(const Exchange& x);
  void write_response_head(const Exchange& x, const http::ResponseHead& res, const http::ResponsePlan& plan,
                           const compress::Plan& coding);
  boost::asio::awaitable<bool> send_fixed_answer(Exchange& x);
  boost::asio::awaitable<bool> send_acme_answer(Exchange& x, std::string key_authorization);
  void log_exchange(const Exchange& x);
  // To an h2c or h2 upstream (downstream_h2.cpp): the request as an HTTP/2 stream on a connection
  // the worker shares (h2_exchange.hpp), its body sent before the answer is awaited; the answer's
  // head written as HTTP/1.1 and its DATA relayed (chunked when it has no length).
  H2Exchange& h2_exchange();
  boost::asio::awaitable<Failure> attempt_h2(Exchange& x, Endpoint& ep, Clock::time_point try_until);
  boost::asio::awaitable<FailureKind> upload_h2(Exchange& x, H2Call& call);
  boost::asio::awaitable<bool> respond_h2(Exchange& x);
  boost::asio::awaitable<bool> relay_h2(Exchange& x, H2Call& call, const http::ResponsePlan& plan);
  bool end_h2_delivery(Exchange& x, Endpoint& ep);
  // `servers`: where the record's list of servers tried is written (it refers to it).
  AccessRecord access_record(const Exchange& x, AttemptRecord::ServersText& servers) const;

  // Every I/O runs under the session's deadline; an operation that expire() cancelled reports
  // beast::error::timeout once passed through timed().
  void expire_after(Clock::duration d) noexcept;
  // The same from the clock itself, not the turn's reading: a new connection's header_timeout
  // runs from its accept at the earliest, however long the turn that accepted it lasted.
  void expire_from_now(Clock::duration d) noexcept;
  // Between requests: the idle timeout, and on a plain connection the earlier park deadline.
  void arm_idle(Clock::duration idle_timeout) noexcept;
  boost::system::error_code timed(boost::system::error_code ec) const noexcept;
  // Request-scoped memory: an arena for both heads and the body relay buffer, borrowed from the
  // worker when a request starts and returned when it ends (an idle connection holds neither).
  void begin_exchange_memory();
  void end_exchange_memory();

  WorkerContext& worker_;
  socket_type client_;
  std::shared_ptr<tls::ServerContext> tls_;
  // What the client's certificate showed, read once after the handshake of a listener with
  // verify_client on; null otherwise (a plain connection, or no certificate asked for).
  std::unique_ptr<const tls::ClientCertificate> client_cert_;
  std::string client_ip_;  // the peer, or the client a PROXY protocol header named
  boost::asio::ip::address client_addr_;  // the same, parsed
  bool proxy_protocol_ = false;
  // Bytes not yet parsed from the client. Their memory comes from the worker's block pool and
  // goes back to it whenever they are empty between exchanges, so an idle connection holds no
  // buffer.
  using HeadBuffer = boost::beast::basic_flat_buffer<PoolAllocator<char>>;
  HeadBuffer in_;
  std::string head_out_;             // serialized head towards the origin or the client
  Arena arena_;
  // The request's way to the origin and the origin's answer head (its buffer, head, connection).
  UpstreamExchange up_{worker_, *this, timed_out_, arena_};
  // The same to an h2c or h2 upstream, made for the connection's first such request.
  std::unique_ptr<H2Exchange> h2_;
  Exchange* x_ = nullptr;  // the request being served, for ClientSide's calls
  // The request head, indexed in one pass once its end is in in_, then over a
  // copy of its bytes in the arena (body reads into in_ may move them): request_ is the complete
  // head in hand (nullptr: none); its index is in the arena (look_at_head()). refused_: the admission's refusal of that head (413, 501, a bad target), answered
  // by handle_request() as a request (with its id, logged).
  const http::RequestHead* request_ = nullptr;
  http::RequestHead* request_store_ = nullptr;
  char* request_bytes_ = nullptr;
  ProxyError refused_;
  char* relay_ = nullptr;
  // The request's chunked body: its decoder, and the decoded bytes waiting at the start of relay_
  // for next_upload_piece() (what keep_chunked_body() read when the body outgrew relay_).
  http::ChunkedDecoder chunked_;
  std::size_t chunked_pending_ = 0;
  std::optional<boost::asio::steady_timer> backoff_timer_;  // wait_for()'s; made on first use
  std::shared_ptr<const Snapshot> snapshot_;
  bool first_request_ = true;
  bool idle_ = false;       // waiting for the first byte of a next request
  // Parking: the idle wait expire() may turn into parking, expire() did, run() ended parked.
  bool parkable_wait_ = false;
  bool parking_ = false;
  bool parked_ = false;
  Clock::time_point idle_until_{};
  bool closed_ = false;
  bool timed_out_ = false;  // expire() cancelled the operation under way
  // After a 101: what run()'s end leaves to the worker's TunnelSession (take_tunnel()).
  std::unique_ptr<TunnelHandoff> tunnel_;
  // The connection turned out to speak HTTP/2: what run()'s end leaves to an Http2Session.
  std::unique_ptr<Http2Handoff> http2_;
  bool spoke_http1_ = false;  // a request was read: an HTTP/2 preface can no longer come
  bool alpn_h2() noexcept;
  HeadResult refuse_head(std::string_view buffered, const ProxyError& why, ProxyError& error) const;
  bool h2c_preface(std::string_view buffered) const noexcept;
  void hand_to_http2() noexcept;
};

// Called around every read and write, from each of the session's files: inline.
inline void DownstreamSession::expire_after(Clock::duration d) noexcept {
  deadline = worker_.clock.now() + d;
  timed_out_ = false;
}

inline void DownstreamSession::expire_from_now(Clock::duration d) noexcept {
  deadline = worker_.clock.exact() + d;
  timed_out_ = false;
}

inline boost::system::error_code DownstreamSession::timed(boost::system::error_code ec) const noexcept {
  return timed_error(ec, timed_out_);
}

}  // namespace sluice::proxy

// A request nests several of the session's coroutines; their frames come from the worker's
// FramePool (core/pooled_frame.hpp).
SLUICE_POOLED_COROUTINES(sluice::proxy::DownstreamSession);
SLUICE_POOLED_COROUTINES_TAKING(sluice::proxy::DownstreamSession::RequestHooks);
SLUICE_POOLED_COROUTINES_TAKING(sluice::proxy::DownstreamSession::ForwardHooks);
SLUICE_POOLED_COROUTINES_TAKING(sluice::proxy::DownstreamSession::H2ForwardHooks);
SLUICE_POOLED_COROUTINES_TAKING(sluice::proxy::DownstreamSession::ResponseHooks);
