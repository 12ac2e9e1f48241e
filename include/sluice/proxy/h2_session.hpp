#pragma once
// An HTTP/2 client connection (RFC 9113): ALPN "h2" on a TLS listener, or h2c with prior
// knowledge on a plain one with [server] h2c on (docs/http2.md). nghttp2's server session does
// the framing, HPACK, flow control and the streams' state machine; this class feeds it our
// socket's bytes (nghttp2_session_mem_recv) and writes what it has to send
// (nghttp2_session_mem_send), and its callbacks hand each stream's events to its Http2Stream.
// There is no frame or HPACK parsing of our own.
//
// The connection is the worker's SessionLink: while streams are open its deadline is checked at
// every tick, and each stream's own deadline (its upstream I/O, its answer) is enforced from
// there. Graceful shutdown sends GOAWAY and lets the open streams finish; a client resetting
// streams before their answer past [server] http2_max_early_resets (Rapid Reset) gets
// GOAWAY(ENHANCE_YOUR_CALM) and the connection closes.
//
// One worker's thread; owned by the worker's coroutine that runs run().
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nghttp2/nghttp2.h>

#include "sluice/core/pooled_frame.hpp"
#include "sluice/proxy/worker_context.hpp"
#include "sluice/tls/context.hpp"
#include "sluice/tls/stream.hpp"

namespace sluice::proxy {

class Http2Stream;

// What the HTTP/2 connections did, for /metrics. One set per worker, written by that worker alone
// (add_own); /metrics sums them.
inline constexpr std::size_t http2_reset_reasons = 15;  // error codes 0..13, then any other
struct Http2Counters {
  std::atomic<std::uint64_t> connections{0};  // turned HTTP/2 (ALPN h2 or h2c)
  std::atomic<std::uint64_t> connections_closed{0};
  std::atomic<std::uint64_t> streams{0};      // request streams the clients opened
  std::atomic<std::uint64_t> streams_closed{0};  // and sluice was done with
  // RST_STREAM frames by error code (http2_reset_names): [0] the clients', [1] sluice's.
  std::atomic<std::uint64_t> resets[2][http2_reset_reasons] = {};
  std::atomic<std::uint64_t> goaways_sent{0};
  std::atomic<std::uint64_t> early_resets{0};  // streams the client reset before their answer
  std::atomic<std::uint64_t> calm_closes{0};  // connections closed with GOAWAY(ENHANCE_YOUR_CALM)
  // Frames that brought no request (http2_max_glitches), by kind (Http2Glitch), and the
  // connections closed for them.
  std::atomic<std::uint64_t> glitches[5] = {};
  std::atomic<std::uint64_t> glitch_closes{0};
};
enum class Http2Glitch : std::uint8_t { ping, settings, priority, empty_data, invalid_frame };
inline constexpr std::string_view http2_glitch_names[] = {"ping", "settings", "priority", "empty_data",
                                                          "invalid_frame"};
// RFC 9113 §7's error codes by value, as metric labels; "other" for any other value.
inline constexpr std::string_view http2_reset_names[http2_reset_reasons] = {
    "no_error",     "protocol_error", "internal_error",    "flow_control_error", "settings_timeout",
    "stream_closed", "frame_size_error", "refused_stream", "cancel",             "compression_error",
    "connect_error", "enhance_your_calm", "inadequate_security", "http_1_1_required", "other"};
std::uint64_t http2_reset_total(bool sent, std::size_t reason) noexcept;
// Client connections open as HTTP/2, and their streams open, over every worker.
std::uint64_t http2_open_connections() noexcept;
std::uint64_t http2_open_streams() noexcept;

// Worker `worker`'s counters (default_worker_slots slots; see core/per_worker.hpp).
Http2Counters& http2_counters(unsigned worker) noexcept;
// The sum over every worker of one field (the control thread, at scrape).
std::uint64_t http2_total(std::atomic<std::uint64_t> Http2Counters::*field) noexcept;
enum class Http2Glitch : std::uint8_t;
std::uint64_t http2_glitch_total(Http2Glitch kind) noexcept;

// The client's HTTP/2 connection preface (RFC 9113 §3.4) starts with this line.
inline constexpr std::string_view h2_preface_line = "PRI * HTTP/2.0\r\n";
inline constexpr std::string_view h2_alpn = "h2";

// What an HTTP/1.1 session hands over when its connection turns out to speak HTTP/2: the stream,
// who the client is, and the bytes already read (the preface, perhaps more).
struct Http2Handoff {
  tls::Stream client;
  boost::asio::ip::address client_address;
  std::string client_ip;
  std::shared_ptr<tls::ServerContext> tls;
  std::string received;
  // What the client's certificate showed (a listener with verify_client on), else null.
  std::unique_ptr<const tls::ClientCertificate> client_cert;
};

class Http2Session final : public SessionLink {
public:
  Http2Session(WorkerContext& worker, Http2Handoff handoff);
  ~Http2Session();
  Http2Session(const Http2Session&) = delete;
  Http2Session& operator=(const Http2Session&) = delete;

  boost::asio::awaitable<void> run();

  void expire() override;
  void close_if_idle() override;
  void close() override;
  bool holds_upstream() const noexcept override;

  // For the streams.
  WorkerContext& worker() noexcept { return worker_; }
  nghttp2_session* native() noexcept { return session_; }
  const std::string& client_ip() const noexcept { return client_ip_; }
  const boost::asio::ip::address& client_address() const noexcept { return client_address_; }
  bool is_tls() const noexcept { return client_.is_tls(); }
  const tls::ClientCertificate* client_cert() const noexcept { return client_cert_.get(); }
  // nghttp2 has frames to send: the writer wakes.
  void want_write() noexcept;

  // nghttp2's callbacks (h2_session.cpp), as members.
  int begin_headers(const nghttp2_frame& frame);
  void last_request(std::int32_t id);
  // A frame that brought no request (http2_max_glitches).
  void glitch(Http2Glitch kind);
  int frame_received(const nghttp2_frame& frame);
  int frame_sent(const nghttp2_frame& frame);
  int stream_closed(std::int32_t id, std::uint32_t error_code);

private:
  void open_session();
  boost::asio::awaitable<void> read_loop();
  boost::asio::awaitable<void> write_loop();
  boost::asio::awaitable<void> serve_stream(Http2Stream& stream);
  boost::asio::awaitable<void> wait_streams();
  boost::asio::awaitable<void> final_goaway();
  bool feed(std::string_view bytes);
  void start_streams();
  void start_ready(Http2Stream& stream);
  void forget(Http2Stream& stream);
  void check_done() noexcept;
  void arm_idle() noexcept;
  void early_reset();
  void count_reset(bool sent, std::uint32_t error_code) noexcept;
  bool is_glitch(const nghttp2_frame& frame) noexcept;

  WorkerContext& worker_;
  tls::Stream client_;
  boost::asio::ip::address client_address_;
  std::string client_ip_;
  std::shared_ptr<tls::ServerContext> tls_;
  std::string received_;
  std::unique_ptr<const tls::ClientCertificate> client_cert_;
  nghttp2_session* session_ = nullptr;
  SessionList streams_;  // every Http2Stream of the connection
  std::string out_;      // frames gathered for one write
  boost::asio::steady_timer write_wake_;
  boost::asio::steady_timer done_wake_;
  boost::asio::steady_timer goaway_timer_;
  unsigned running_ = 0;  // stream coroutines not yet ended
  std::uint32_t early_resets_ = 0;
  std::uint32_t max_early_resets_ = 0;
  std::uint32_t requests_left_ = 0;  // before the GOAWAY of http2_max_requests (0: no limit)
  // Glitches not yet forgiven (one a second) as of glitch_at_, and the budget.
  std::uint32_t glitches_ = 0;
  std::uint32_t max_glitches_ = 0;
  Clock::time_point glitch_at_{};
  bool settings_seen_ = false;  // the client's first SETTINGS (its preface's) is no glitch
  Clock::duration idle_timeout_{};
  bool draining_ = false;  // the GOAWAY of a shutdown or of the last request is on its way
  // want_write() was called since the writer's last nghttp2_session_mem_send() pass.
  bool write_wanted_ = false;
  bool writing_ = false, writer_done_ = false, finishing_ = false, closed_ = false, timed_out_ = false;
};

}  // namespace sluice::proxy

SLUICE_POOLED_COROUTINES(sluice::proxy::Http2Session);
