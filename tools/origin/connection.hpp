#pragma once
// One accepted TCP connection, served by one coroutine on its worker's thread from accept to
// close; the connection object lives in that coroutine's frame.
//
// Requests are answered strictly in order (pipelining, RFC 9112 §9.3.2). Responses are gathered in
// one output buffer and written only when the connection would otherwise wait — for more bytes
// from the client, for a delay, or to stream a large body — so a pipelined burst goes out in one
// write and a lone keep-alive request costs one read and one write.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/intrusive/list_hook.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "knobs.hpp"
#include "read_buffer.hpp"
#include "request.hpp"
#include "sha256.hpp"

namespace sluice::origin {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

class origin_state;
class worker;

class connection : public boost::intrusive::list_base_hook<
                       boost::intrusive::link_mode<boost::intrusive::auto_unlink>> {
 public:
  using clock = std::chrono::steady_clock;

  // Serves `socket` until either side closes it. Must be started on owner's io_context.
  static asio::awaitable<void> serve(worker& owner, tcp::socket socket);

  connection(worker& owner, tcp::socket socket);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Called by the worker's idle sweep on the same thread: closes the socket if the connection
  // has been waiting for the client since before `cutoff`. The pending read then fails and the
  // coroutine ends by itself.
  void close_if_idle_since(clock::time_point cutoff);

 private:
  enum class read_result : std::uint8_t { ok, closed, bad, too_large };
  enum class route : std::uint8_t { normal, health, health_status, stats, stats_reset };

  // Everything a response needs besides the knobs that shape its framing and ending.
  struct reply {
    unsigned status = 200;
    std::string_view body;  // must outlive send(); ignored when pattern_size is set
    std::optional<std::uint64_t> pattern_size;
    std::string_view content_type;
    std::string_view extra_headers;  // complete lines: "Name: value\r\n"
  };

  asio::awaitable<void> run();
  asio::awaitable<read_result> read_header();
  asio::awaitable<read_result> read_body();
  asio::awaitable<bool> read_more(std::size_t want);
  asio::awaitable<bool> flush();
  // Answers a request routed to `r`; false when the connection is finished.
  asio::awaitable<bool> respond(route r, knobs k, bool bad_knob, bool keep_alive);
  void log_execution();
  asio::awaitable<bool> send(const reply& rep, const knobs& k, bool keep_alive);
  asio::awaitable<bool> write_body(const reply& rep, std::uint64_t count, bool chunked);
  // Answers a request that cannot be parsed (400, or 431 for an oversized header) with
  // Connection: close, then closes.
  asio::awaitable<void> reject(unsigned status);
  asio::awaitable<void> linger_close();
  asio::awaitable<void> drain_input();
  // The `websocket` knob: true when the request was a WebSocket handshake, which then takes the
  // connection over (accepted, every message echoed until the client closes).
  bool is_websocket_upgrade() const;
  asio::awaitable<void> websocket_echo();
  void abort();

  // Applies X-Origin-<Knob> headers, then query parameters so that the query wins.
  // On an invalid value, returns false and leaves a description in body_.
  bool resolve_knobs(knobs& k);
  void control_reply(route r, reply& rep);

  worker& owner_;
  origin_state& state_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  read_buffer in_;
  std::string out_;
  request req_;
  std::optional<request_parser> parser_;
  // Bodies built per request (JSON, messages); kept to reuse its capacity.
  std::string body_;
  std::unique_ptr<sha256> digest_;
  // Set while a read for the client is pending; the idle sweep closes only such connections.
  bool waiting_ = false;
  clock::time_point waiting_since_;
};

}  // namespace sluice::origin
