#include "connection.hpp"

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include "origin_state.hpp"
#include "wire.hpp"
#include "worker.hpp"

namespace sluice::origin {

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// Small responses are copied into the output buffer and coalesced; bigger bodies are written
// straight from where they live (the shared pattern, body_) to avoid the copy.
constexpr std::size_t coalesce_limit = 16 * 1024;
// Pending output that is written even though more pipelined requests are waiting.
constexpr std::size_t flush_threshold = 64 * 1024;
// How much free space to ask for when reading a body, so uploads move in large reads.
constexpr std::size_t body_read_size = 32 * 1024;
// How long a closing connection keeps reading before it gives up on the client's FIN.
constexpr std::chrono::seconds linger_timeout{1};

constexpr std::string_view json_type = "application/json";
constexpr std::string_view knob_header_prefix = "x-origin-";

bool is_update(http::verb v) { return v == http::verb::post || v == http::verb::put; }

}  // namespace

asio::awaitable<void> connection::serve(worker& owner, tcp::socket socket) {
  connection c(owner, std::move(socket));
  co_await c.run();
}

connection::connection(worker& owner, tcp::socket socket)
    : owner_(owner),
      state_(owner.state()),
      socket_(std::move(socket)),
      timer_(socket_.get_executor()) {
  owner_.add(*this);
  state_.connection_opened();
  boost::system::error_code ignored;
  // Responses are single writes already; Nagle would only hold back the tail of large bodies
  // and the 100 Continue interim response.
  socket_.set_option(tcp::no_delay(true), ignored);
  // read_more() reads only after a readiness wait; a read must never block the worker.
  socket_.non_blocking(true, ignored);
}

connection::~connection() { state_.connection_closed(); }

void connection::close_if_idle_since(clock::time_point cutoff) {
  if (waiting_ && waiting_since_ < cutoff) {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }
}

asio::awaitable<void> connection::run() {
  for (;;) {
    req_.clear();
    parser_.emplace(req_);
    const read_result head = co_await read_header();
    if (head == read_result::closed) co_return;
    if (head == read_result::bad || head == read_result::too_large) {
      co_await reject(head == read_result::bad ? 400 : 431);
      co_return;
    }

    const std::string_view path = target_path(req_.target());
    route r = route::normal;
    if (path == "/health")
      r = route::health;
    else if (path == "/health/status")
      r = route::health_status;
    else if (path == "/stats")
      r = route::stats;
    else if (path == "/stats/reset")
      r = route::stats_reset;

    knobs k;
    bool bad_knob = false;
    std::optional<in_flight_scope> in_flight;
    if (r == route::normal || r == route::health) {
      bad_knob = !resolve_knobs(k);
      if (r == route::normal)
        in_flight.emplace(state_, req_.verb == http::verb::post);
      else
        state_.health_request();
    }
    if (k.sink == sink_mode::sha256) {
      if (!digest_) digest_ = std::make_unique<sha256>();
      digest_->reset();
      req_.digest = digest_.get();
    }

    // RFC 9110 §10.1.1: the client waits for this before sending the body.
    if (req_.expect_continue && !parser_->is_done()) out_.append("HTTP/1.1 100 Continue\r\n\r\n");
    const read_result body = co_await read_body();
    if (body == read_result::closed) co_return;
    if (body == read_result::bad) {
      co_await reject(400);
      co_return;
    }

    // The request is taken: from here on it counts as executed, answered or not (a test that
    // SIGKILLs the origin must count a request that was read but never answered).
    if (r == route::normal && state_.exec_log_enabled()) log_execution();
    if (r == route::normal && !bad_knob && state_.take_failure()) k.close = close_mode::mid;
    if (r == route::normal && !bad_knob) k.delay_ms += state_.take_slow_delay_ms();

    if (!co_await respond(r, k, bad_knob, parser_->keep_alive())) co_return;
    // A long pipelined burst would otherwise pile all of its responses up in memory.
    if (out_.size() >= flush_threshold) {
      if (!co_await flush()) co_return;  // not inside && (GCC 12 miscompiles co_await there)
    }
  }
}

asio::awaitable<void> connection::reject(unsigned status) {
  // After a framing error nothing further on this connection can be trusted to be a request.
  reply rep;
  rep.status = status;
  rep.body = status == 431 ? "request header too large\n" : "bad request\n";
  co_await send(rep, knobs{}, false);
}

asio::awaitable<connection::read_result> connection::read_header() {
  for (;;) {
    // RFC 9112 §2.2: ignore empty lines before a request-line (some clients send CRLF after a
    // POST body). Beast consumes nothing until the whole header is there, so the front of the
    // buffer is always the start of this request.
    std::string_view data = in_.data();
    std::size_t blank = 0;
    while (blank < data.size() && (data[blank] == '\r' || data[blank] == '\n')) ++blank;
    in_.consume(blank);

    if (!in_.empty()) {
      boost::system::error_code ec;
      const auto n = parser_->put(asio::buffer(in_.data().data(), in_.data().size()), ec);
      in_.consume(n);
      if (!ec) co_return read_result::ok;
      if (ec == http::error::header_limit) co_return read_result::too_large;
      if (ec != http::error::need_more) co_return read_result::bad;
    }
    if (!co_await read_more(0)) co_return read_result::closed;
  }
}

asio::awaitable<connection::read_result> connection::read_body() {
  while (!parser_->is_done()) {
    if (!in_.empty()) {
      boost::system::error_code ec;
      const auto n = parser_->put(asio::buffer(in_.data().data(), in_.data().size()), ec);
      in_.consume(n);
      if (!ec) continue;
      if (ec != http::error::need_more) co_return read_result::bad;
    }
    // EOF or a reset mid-body: the client is gone and there is nobody left to answer.
    if (!co_await read_more(body_read_size)) co_return read_result::closed;
  }
  co_return read_result::ok;
}

asio::awaitable<bool> connection::read_more(std::size_t want) {
  // Everything answered so far goes out before waiting on the client, which may be waiting on it.
  if (!co_await flush()) co_return false;
  const auto space = in_.prepare(want);
  // Full buffer: only possible with an unfinished chunk-size line longer than the buffer.
  if (space.size() == 0) co_return false;
  waiting_ = true;
  if (owner_.tracks_idle()) waiting_since_ = clock::now();
  for (;;) {
    // Wait for readiness, then read without blocking. async_read_some would first try a
    // speculative recv, which for a keep-alive client that is still reading our last
    // response fails with EAGAIN: one wasted syscall per request.
    const auto [wait_ec] = co_await socket_.async_wait(tcp::socket::wait_read, use_tuple);
    boost::system::error_code ec = wait_ec;
    std::size_t n = 0;
    if (!ec) n = socket_.read_some(space, ec);
    if (ec == asio::error::would_block) continue;
    waiting_ = false;
    if (ec) co_return false;
    in_.commit(n);
    co_return true;
  }
}

asio::awaitable<bool> connection::flush() {
  if (out_.empty()) co_return true;
  const auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(out_), use_tuple);
  out_.clear();
  co_return !ec;
}

bool connection::resolve_knobs(knobs& k) {
  std::string_view bad_name;
  std::string_view bad_value;
  const auto apply = [&](std::string_view name, std::string_view knob, std::string_view value) {
    if (!k.set(knob, value) && bad_name.empty()) {
      bad_name = name;
      bad_value = value;
    }
  };
  for (const auto& f : req_.fields) {
    const std::string_view name = req_.name(f);
    if (name.size() > knob_header_prefix.size() &&
        boost::beast::iequals(name.substr(0, knob_header_prefix.size()), knob_header_prefix))
      apply(name, name.substr(knob_header_prefix.size()), req_.value(f));
  }
  for_each_query_param(req_.target(), [&](std::string_view name, std::string_view value) {
    apply(name, name, value);
  });
  if (bad_name.empty()) return true;
  body_.assign("bad value for knob ")
      .append(bad_name)
      .append(": '")
      .append(bad_value)
      .append("'\n");
  return false;
}

void connection::log_execution() {
  // "METHOD TARGET X-Request-Id Idempotency-Key\n" ("-" for a missing field). Only with
  // --exec-log, so the plain path still allocates nothing.
  std::string_view id = "-";
  std::string_view key = "-";
  for (std::size_t i = 0; i < req_.header_count; ++i) {
    const auto& f = req_.fields[i];
    if (boost::beast::iequals(req_.name(f), "x-request-id")) id = req_.value(f);
    if (boost::beast::iequals(req_.name(f), "idempotency-key")) key = req_.value(f);
  }
  std::string line;
  line.append(req_.method()).append(" ").append(req_.target()).append(" ");
  line.append(id).append(" ").append(key).append("\n");
  state_.log_execution(line);
}

void connection::control_reply(route r, reply& rep) {
  const bool update = is_update(req_.verb);
  switch (r) {
    case route::stats_reset:
      if (!update) {
        rep.status = 405;
        rep.extra_headers = "Allow: POST, PUT\r\n";
        rep.body = "use POST to reset the counters\n";
        return;
      }
      state_.reset_counters();
      [[fallthrough]];
    case route::stats:
      body_ = state_.stats_json();
      rep.body = body_;
      rep.content_type = json_type;
      return;
    case route::health_status: {
      if (update) {
        std::optional<std::uint64_t> code;
        for_each_query_param(req_.target(), [&](std::string_view name, std::string_view value) {
          if (name == "code") code = parse_decimal(value);
        });
        if (!code || *code < 200 || *code > 599) {
          rep.status = 400;
          rep.body = "expected ?code=200..599\n";
          return;
        }
        state_.set_health_status(static_cast<unsigned>(*code));
      }
      body_.assign("health status ");
      append_decimal(body_, state_.health_status());
      body_.push_back('\n');
      rep.body = body_;
      return;
    }
    case route::normal:
    case route::health:
      return;
  }
}

asio::awaitable<bool> connection::respond(route r, knobs k, bool bad_knob, bool keep_alive) {
  reply rep;
  if (r != route::normal && r != route::health) {
    control_reply(r, rep);
    co_return co_await send(rep, knobs{}, keep_alive);
  }
  if (bad_knob) {
    // resolve_knobs left the reason in body_. The request itself was well-formed HTTP, so the
    // connection stays usable.
    rep.status = 400;
    rep.body = body_;
    co_return co_await send(rep, knobs{}, keep_alive);
  }

  if (k.delay_ms != 0) {
    // Earlier pipelined answers should not wait for this one's delay.
    if (!co_await flush()) co_return false;
    timer_.expires_after(std::chrono::milliseconds(k.delay_ms));
    co_await timer_.async_wait(use_tuple);
  }
  if (k.close == close_mode::before) {
    co_await flush();
    abort();
    co_return false;
  }

  if (k.websocket && r == route::normal) {
    if (!is_websocket_upgrade()) {
      rep.status = 400;
      rep.body = "websocket=1 needs a WebSocket upgrade request\n";
      co_return co_await send(rep, knobs{}, keep_alive);
    }
    co_await websocket_echo();
    co_return false;
  }

  rep.status = k.status.value_or(r == route::health ? state_.health_status() : 200);
  if (k.echo || k.sink != sink_mode::off) {
    boost::json::object o;
    if (k.echo) {
      o["method"] = req_.method();
      o["target"] = req_.target();
      o["version"] = req_.version == 10 ? "HTTP/1.0" : "HTTP/1.1";
      // Pairs rather than an object: order, case and repeated names are what tests of
      // header rewriting need to see.
      boost::json::array headers;
      boost::json::array trailers;
      for (std::size_t i = 0; i < req_.fields.size(); ++i) {
        const auto& f = req_.fields[i];
        auto& into = i < req_.header_count ? headers : trailers;
        into.emplace_back(boost::json::array{req_.name(f), req_.value(f)});
      }
      o["headers"] = std::move(headers);
      o["trailers"] = std::move(trailers);
    }
    o["body_bytes"] = req_.body_bytes;
    if (req_.digest != nullptr) o["sha256"] = req_.digest->hex_digest();
    body_ = boost::json::serialize(o);
    rep.body = body_;
    rep.content_type = json_type;
  } else if (k.size || k.close == close_mode::mid) {
    rep.pattern_size = k.size.value_or(1000);
  } else if (r == route::health) {
    rep.body = rep.status < 400 ? "ok" : "unhealthy";
  } else {
    rep.body = state_.name_body();
  }
  co_return co_await send(rep, k, keep_alive);
}

asio::awaitable<bool> connection::send(const reply& rep, const knobs& k, bool keep_alive) {
  // RFC 9110 §6.4.1: 204 and 304 never carry content; §8.6: no Content-Length in a 204.
  const bool bodiless = rep.status == 204 || rep.status == 304;
  // RFC 9112 §6.1: no Transfer-Encoding towards an HTTP/1.0 client; it gets Content-Length.
  const bool chunked = k.chunked && !bodiless && req_.version >= 11;
  const bool announce_close = !keep_alive || k.close == close_mode::after;
  const std::uint64_t length = rep.pattern_size.value_or(rep.body.size());

  append_status_line(out_, rep.status);
  out_.append("X-Origin: ").append(state_.name()).append("\r\n");
  if (!rep.content_type.empty())
    out_.append("Content-Type: ").append(rep.content_type).append("\r\n");
  out_.append(rep.extra_headers);
  if (chunked) {
    out_.append("Transfer-Encoding: chunked\r\n");
  } else if (!bodiless) {
    out_.append("Content-Length: ");
    append_decimal(out_, length);
    out_.append("\r\n");
  }
  if (announce_close)
    out_.append("Connection: close\r\n");
  else if (req_.version < 11)
    out_.append("Connection: keep-alive\r\n");
  out_.append("\r\n");

  // RFC 9110 §9.3.2: HEAD gets the GET head and no content.
  if (req_.verb != http::verb::head && !bodiless) {
    // close=mid stops halfway and never sends the last chunk, so the client sees truncation.
    const std::uint64_t count = k.close == close_mode::mid ? length / 2 : length;
    if (!co_await write_body(rep, count, chunked)) co_return false;
    if (chunked && k.close != close_mode::mid) out_.append("0\r\n\r\n");
  }

  if (k.close == close_mode::mid) {
    co_await flush();
    abort();
    co_return false;
  }
  if (announce_close) {
    co_await linger_close();
    co_return false;
  }
  co_return true;
}

asio::awaitable<bool> connection::write_body(const reply& rep, std::uint64_t count, bool chunked) {
  std::uint64_t sent = 0;
  while (sent < count) {
    const auto n =
        static_cast<std::size_t>(std::min<std::uint64_t>(count - sent, pattern_slice_max));
    // Every slice starts at a multiple of pattern_slice_max, hence at pattern offset 0.
    const std::string_view piece =
        rep.pattern_size ? pattern_slice(n) : rep.body.substr(static_cast<std::size_t>(sent), n);
    if (chunked) {
      append_hex(out_, n);
      out_.append("\r\n");
    }
    if (out_.size() + n <= coalesce_limit) {
      out_.append(piece);
    } else {
      const std::array<asio::const_buffer, 2> buffers{asio::buffer(out_), asio::buffer(piece)};
      const auto [ec, written] = co_await asio::async_write(socket_, buffers, use_tuple);
      out_.clear();
      if (ec) co_return false;
    }
    // The chunk's closing CRLF rides in front of the next chunk-size line.
    if (chunked) out_.append("\r\n");
    sent += n;
  }
  co_return true;
}

asio::awaitable<void> connection::linger_close() {
  if (!co_await flush()) co_return;
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  // RFC 9112 §9.6: close in stages. Closing with unread input (say, a pipelined request behind
  // the one answered) makes the kernel send RST, which can destroy the response before the client
  // has read it; so read and discard until the client's FIN, for a bounded time.
  using namespace asio::experimental::awaitable_operators;
  timer_.expires_after(linger_timeout);
  co_await (drain_input() || timer_.async_wait(use_tuple));
}

asio::awaitable<void> connection::drain_input() {
  for (;;) {
    in_.clear();
    const auto [ec, n] = co_await socket_.async_read_some(in_.prepare(0), use_tuple);
    if (ec) co_return;
  }
}

bool connection::is_websocket_upgrade() const {
  if (req_.verb != http::verb::get || req_.version < 11) return false;
  for (std::size_t i = 0; i < req_.header_count; ++i) {
    const auto& f = req_.fields[i];
    if (boost::beast::iequals(req_.name(f), "upgrade") &&
        boost::beast::iequals(req_.value(f), "websocket"))
      return true;
  }
  return false;
}

asio::awaitable<void> connection::websocket_echo() {
  namespace websocket = boost::beast::websocket;
  // Beast accepts a handshake from a request message: rebuild one from what was parsed.
  http::request<http::empty_body> handshake;
  handshake.method(req_.verb);
  handshake.target(req_.target());
  handshake.version(req_.version);
  for (std::size_t i = 0; i < req_.header_count; ++i)
    handshake.insert(req_.name(req_.fields[i]), req_.value(req_.fields[i]));
  // Earlier pipelined answers first. Bytes the client sent after its handshake (it should wait
  // for the 101) would be lost here; clients following RFC 6455 §4.1 send none.
  if (!co_await flush()) co_return;
  websocket::stream<tcp::socket> ws(std::move(socket_));
  ws.set_option(websocket::stream_base::decorator(
      [name = std::string(state_.name())](websocket::response_type& res) { res.set("X-Origin", name); }));
  // Messages of any size the tests send; the default 16 MiB limit is plenty for them.
  const auto [accept_ec] = co_await ws.async_accept(handshake, use_tuple);
  if (accept_ec) co_return;
  boost::beast::flat_buffer buffer;
  for (;;) {
    const auto [read_ec, n] = co_await ws.async_read(buffer, use_tuple);
    if (read_ec) co_return;  // closed by the client (a close frame), or the connection failed
    ws.text(ws.got_text());
    const auto [write_ec, written] = co_await ws.async_write(buffer.data(), use_tuple);
    if (write_ec) co_return;
    buffer.consume(buffer.size());
  }
}

void connection::abort() {
  // A plain close: the client sees EOF where more was promised (a truncated body, or no
  // response at all). Unread input, if any, turns it into an RST, as a crashed server would.
  boost::system::error_code ignored;
  socket_.close(ignored);
}

}  // namespace sluice::origin
