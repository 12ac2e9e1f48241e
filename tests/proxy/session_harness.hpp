#pragma once
// Shared by the session tests (tests/proxy/session*_test.cpp): a worker's context over an
// io_context, a ManualClock and an access log that is off; a Snapshot built from TOML whose one
// server is a test origin on a loopback port; sessions started on accepted loopback connections
// as Worker::serve starts them; and the two peers of a session, a client and that origin, run on
// the same io_context as coroutines that record every byte they receive. Everything happens on
// the test's thread: a test runs the io_context until what it waits for holds, within a bound.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "sluice/config/loader.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/proxy/downstream_session.hpp"
#include "sluice/proxy/h2_session.hpp"
#include "sluice/runtime/snapshot.hpp"
#include "sluice/telemetry/access_log.hpp"
#include "sluice/tls/edge_io.hpp"

namespace sluice::proxy::session_test {

using namespace std::chrono_literals;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;

inline constexpr auto nothrow = net::as_tuple(net::use_awaitable);
inline constexpr std::size_t malformed = std::numeric_limits<std::size_t>::max();

// The size of the first complete HTTP message at the start of `bytes` (0: not complete yet;
// `malformed`), parsed by Beast, and its body, de-chunked, in `body`. `head_only`: complete once
// its head is.
template <bool is_request>
std::size_t message_size(std::string_view bytes, std::string* body = nullptr,
                         bool head_only = false) {
  namespace bhttp = boost::beast::http;
  bhttp::parser<is_request, bhttp::string_body> parser;
  parser.eager(!head_only);
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  std::size_t used = 0;
  while (!parser.is_done() && !(head_only && parser.is_header_done())) {
    if (used == bytes.size()) return 0;
    error_code ec;
    used += parser.put(net::buffer(bytes.data() + used, bytes.size() - used), ec);
    if (ec == bhttp::error::need_more) return 0;
    if (ec) return malformed;
  }
  if (body != nullptr) *body = parser.get().body();
  return used;
}

// A body of `n` bytes that vary with their offset: a piece lost, repeated or out of place shows.
inline std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('!' + (i * 7 + i / 251) % 90);
  return s;
}

// The head an origin gets for a bodiless request of the tests' client: `line` ("GET / HTTP/1.1")
// and Host app.test, the client's own `fields` (whole lines, in order), then the X-Forwarded-*
// fields for `client` over `proto`, and `id` as X-Request-Id (the client's own is re-sent last).
inline std::string forwarded_head(std::string_view line, std::string_view id,
                                  std::string_view fields = "",
                                  std::string_view client = "127.0.0.1",
                                  std::string_view proto = "http") {
  std::string head(line);
  head.append("\r\nHost: app.test\r\n").append(fields);
  head.append("X-Forwarded-For: ").append(client).append("\r\n");
  head.append("X-Forwarded-Proto: ").append(proto).append("\r\n");
  head.append("X-Forwarded-Host: app.test\r\nX-Request-Id: ").append(id).append("\r\n\r\n");
  return head;
}

// The value of the first `name` line in the head of `message` ("" when there is none).
inline std::string field_of(std::string_view message, std::string_view name) {
  const auto head = message.substr(0, message.find("\r\n\r\n") + 2);
  const std::string key = "\r\n" + std::string(name) + ": ";
  const auto at = head.find(key);
  if (at == std::string_view::npos) return {};
  const auto start = at + key.size();
  return std::string(head.substr(start, head.find("\r\n", start) - start));
}

// What follows the head of `message`.
inline std::string body_of(std::string_view message) {
  const auto end = message.find("\r\n\r\n");
  return end == std::string_view::npos ? std::string() : std::string(message.substr(end + 4));
}

// The test's origin: accepts every connection, records what each received, and answers each
// complete request with `response`.
class Origin {
public:
  enum class After {
    keep_open,  // ready for the next request
    close,  // closes the connection right after the answer (its FIN follows the answer)
    half_close,  // FIN after the answer, then reads (and answers) nothing more until the EOF
  };
  struct Connection {
    explicit Connection(const tcp::acceptor::executor_type& executor) : socket(executor) {}
    tcp::socket socket;
    std::string received;  // every byte, as it came
    std::size_t answered = 0;  // requests answered
    bool ended = false;  // the proxy closed it (a read ended)
    error_code end;
  };

  explicit Origin(net::io_context& io)
      : acceptor_(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    net::co_spawn(io, accept_loop(), net::detached);
  }

  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::size_t accepted() const { return connections.size(); }
  std::size_t requests() const {
    std::size_t n = 0;
    for (const auto& c : connections) n += c->answered;
    return n;
  }
  // Stops listening (a connect is refused from now on), keeps the connections.
  void stop_listening() {
    error_code ignored;
    acceptor_.close(ignored);
  }
  void stop() {
    stop_listening();
    error_code ignored;
    for (auto& c : connections) c->socket.close(ignored);
  }

  std::string response = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  After after = After::keep_open;
  bool answer_at_head = false;  // answer once a request's head is in, not waiting for its body
  std::vector<std::unique_ptr<Connection>> connections;

private:
  net::awaitable<void> accept_loop() {
    for (;;) {
      auto c = std::make_unique<Connection>(acceptor_.get_executor());
      auto [ec] = co_await acceptor_.async_accept(c->socket, nothrow);
      if (ec) co_return;
      connections.push_back(std::move(c));
      net::co_spawn(acceptor_.get_executor(), serve(*connections.back()), net::detached);
    }
  }

  net::awaitable<void> serve(Connection& c) {
    std::size_t parsed = 0;  // bytes of the requests answered
    bool answering = true;
    char buffer[16 * 1024];
    for (;;) {
      auto [ec, n] = co_await c.socket.async_read_some(net::buffer(buffer), nothrow);
      c.received.append(buffer, n);
      if (ec) {
        c.ended = true;
        c.end = ec;
        co_return;
      }
      while (answering) {
        const auto size = message_size<true>(std::string_view(c.received).substr(parsed), nullptr,
                                             answer_at_head);
        if (size == 0 || size == malformed) break;
        parsed += size;
        ++c.answered;
        co_await net::async_write(c.socket, net::buffer(response), nothrow);
        error_code ignored;
        if (after == After::close) {
          c.socket.close(ignored);
          co_return;
        }
        if (after == After::half_close) c.socket.shutdown(tcp::socket::shutdown_send, ignored);
        answering = after == After::keep_open && !answer_at_head;
      }
    }
  }

  tcp::acceptor acceptor_;
};

// The client end of a session's connection: writes what it is given in order, and (once
// reading) records everything that arrives until its connection ends.
class Client {
public:
  explicit Client(tls::Stream s) : stream(std::move(s)) {}

  void start_reading() { net::co_spawn(stream.get_executor(), read_loop(), net::detached); }
  void send(std::string bytes) {
    queue_.push_back(std::move(bytes));
    if (writing_) return;
    writing_ = true;
    net::co_spawn(stream.get_executor(), write_loop(), net::detached);
  }
  bool sent_all() const { return !writing_; }
  // What came after the responses already taken (SessionHarness::next_response()).
  std::string_view unread() const { return std::string_view(received).substr(taken); }

  tls::Stream stream;
  std::string received;
  std::size_t taken = 0;
  bool ended = false;  // the read loop ended: `end` says why (eof: the session closed)
  error_code end;
  std::uint64_t written = 0;
  error_code write_error;

private:
  // The Date sluice adds to answers (http/date.hpp) is the wall clock's: left out of `received`
  // so that the tests here compare exact bytes. Only a line in sluice's own form ("Date: Sun, 06
  // Nov 1994 08:49:37 GMT") goes; an origin's test value ("Date: d") stays. Date itself is
  // tested in tests/http/date_test.cpp, head_index_test.cpp and integration/test_error_answers.py.
  void drop_own_dates() {
    static constexpr std::string_view field = "\r\nDate: ";
    constexpr std::size_t value = 29;
    for (auto at = received.find(field, taken); at != std::string::npos; at = received.find(field, at + 2)) {
      const auto end = at + field.size() + value;
      if (end + 2 <= received.size() && received.compare(end - 4, 6, " GMT\r\n") == 0 &&
          received[at + field.size() + 3] == ',')
        received.erase(at + 2, field.size() - 2 + value + 2);
    }
  }

  net::awaitable<void> read_loop() {
    char buffer[16 * 1024];
    for (;;) {
      auto [ec, n] = co_await stream.async_read_some(net::buffer(buffer), nothrow);
      received.append(buffer, n);
      drop_own_dates();
      if (ec) {
        ended = true;
        end = ec;
        co_return;
      }
    }
  }
  net::awaitable<void> write_loop() {
    while (!queue_.empty()) {
      auto [ec, n] = co_await net::async_write(stream, net::buffer(queue_.front()), nothrow);
      written += n;
      if (ec) {
        write_error = ec;
        queue_.clear();
        break;
      }
      queue_.pop_front();
    }
    writing_ = false;
  }

  std::deque<std::string> queue_;  // a deque: the string being written stays where it is
  bool writing_ = false;
};

inline config::LogSection no_access_log() {
  config::LogSection log;
  log.access = config::AccessLogFormat::off;
  return log;
}

class SessionHarness : public ::testing::Test {
protected:
  SessionHarness() : access_(no_access_log()), worker_(0, io_, clock_, access_), origin_(io_) {
    worker_.shutdown = &shutdown_;
  }

  // As Worker::stop() and join() do: every session closed and its coroutine run to its end,
  // before the worker's context (which the sessions use) goes; the peers' coroutines end too.
  void TearDown() override {
    for (auto it = worker_.sessions.begin(); it != worker_.sessions.end();) (it++)->close();
    for (auto& c : clients_) {
      error_code ignored;
      c->stream.close(ignored);
    }
    origin_.stop();
    // Until no work is left: a handler still queued when the io_context goes would destroy its
    // coroutine, and with it a DownstreamSession, after the worker's context it refers to.
    for (int i = 0; i < 400 && !io_.stopped(); ++i) {
      io_.restart();
      io_.run_for(5ms);
    }
    EXPECT_TRUE(io_.stopped()) << "work left in the io_context";
    EXPECT_TRUE(worker_.sessions.empty());
  }

  // The worker's snapshot from a config whose only upstream, "app", has the origin as its one
  // server. `server_keys` go into [server], `upstream_keys` into [upstreams.app]; `more`
  // (starting with a table header) goes last. error_detail = "full" unless `server_keys` say
  // otherwise: the tests here read the reason from Sluice-Error.
  void configure(const std::string& server_keys = "", const std::string& more = "",
                 const std::string& upstream_keys = "") {
    const bool detail_set = server_keys.find("error_detail") != std::string::npos;
    const std::string text =
        std::string("[server]\nlisten = [\"127.0.0.1:0\"]\n") + (detail_set ? "" : "error_detail = \"full\"\n") +
        server_keys + "\n[upstreams.app]\n" +
        upstream_keys + "\n[[upstreams.app.servers]]\naddress = \"127.0.0.1:" +
        std::to_string(origin_.port()) + "\"\n" + more;
    auto result = config::load_string(text, "session_test.toml");
    std::string errors;
    for (const auto& e : result.errors) errors += e.to_string() + "\n";
    ASSERT_TRUE(result.ok()) << errors << text;
    worker_.snapshot = build_snapshot(
        std::make_shared<const config::Config>(std::move(*result.config)), directory_, ++version_);
  }

  // A client connected to a new session, started as Worker::serve starts it: on the plain
  // listener, or on the snapshot's TLS listener `tls_listener` (the session's first step is then
  // the handshake, which the client has to start itself: it is not reading yet).
  Client& connect(int tls_listener = -1) {
    tcp::acceptor listener(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    tcp::socket client(io_);
    client.connect(listener.local_endpoint());
    tcp::socket server = listener.accept();
    const auto peer = server.remote_endpoint().address();
    net::co_spawn(io_, serve(std::move(server), peer, tls_listener), net::detached);
    clients_.push_back(std::make_unique<Client>(tls::Stream(std::move(client))));
    if (tls_listener < 0) clients_.back()->start_reading();
    return *clients_.back();
  }

  // Runs the io_context until `done()` holds, for at most about five seconds.
  template <class Done>
  bool run_until(Done&& done) {
    for (int i = 0; i < 1000 && !done(); ++i) {
      io_.restart();
      io_.run_for(5ms);
    }
    return done();
  }

  // Runs what is ready, and what that makes ready, until nothing is (loopback bytes written
  // have arrived by then).
  void settle() {
    for (int quiet = 0; quiet < 2;) {
      io_.restart();
      quiet = io_.poll() == 0 ? quiet + 1 : 0;
    }
  }

  // The next response the client received, whole: its exact bytes; empty when its connection
  // ended (or nothing complete came within run_until's bound) before one was complete.
  std::string next_response(Client& c) {
    std::size_t size = 0;
    run_until([&] {
      size = message_size<false>(c.unread());
      return (size != 0 && size != malformed) || c.ended;
    });
    if (size == 0 || size == malformed) return {};
    std::string response(c.unread().substr(0, size));
    c.taken += size;
    return response;
  }

  // What the worker's tick does to its sessions (Worker::tick_loop): expire() on those past
  // their deadline on the worker's clock.
  void tick() {
    const auto now = clock_.now();
    for (auto it = worker_.sessions.begin(); it != worker_.sessions.end();) {
      auto& s = *it++;
      if (s.deadline <= now) s.expire();
    }
  }

  net::io_context io_;
  ManualClock clock_;
  AccessLog access_;
  std::atomic<bool> shutdown_{false};
  EndpointDirectory directory_{clock_};
  WorkerContext worker_;
  Origin origin_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::uint64_t version_ = 0;
  int ended_ = 0;  // sessions whose run() returned
  int parked_ = 0;  // of those, parked ones
  int tunnels_started_ = 0, tunnels_ended_ = 0;  // TunnelSessions after a 101
  bool drop_tunnels_ = false;  // handoffs end without a TunnelSession
  int http2_ended_ = 0;  // Http2Sessions whose run() returned

private:
  net::awaitable<void> serve(tcp::socket socket, net::ip::address peer, int tls_listener) {
    try {
      tls::Stream client(std::move(socket));
      std::shared_ptr<tls::ServerContext> tls;
      const auto& server = worker_.snapshot->config->server;
      bool proxy_protocol = server.proxy_protocol;
      if (tls_listener >= 0) {
        tls = worker_.snapshot->tls.at(static_cast<std::size_t>(tls_listener));
        client.start_tls(tls->context());
        proxy_protocol = server.tls.at(static_cast<std::size_t>(tls_listener)).proxy_protocol;
      }
      DownstreamSession session(worker_, std::move(client), peer, std::move(tls), proxy_protocol);
      co_await session.run();
      ++ended_;
      if (session.parked()) {
        ++parked_;
        session.take_parked();  // closes as it goes
      }
      // As Worker::session_ended: the tunnel runs on without its session.
      if (session.tunneled()) net::co_spawn(io_, serve_tunnel(session.take_tunnel()), net::detached);
      // As Worker::session_ended: an HTTP/2 connection goes on in an Http2Session.
      if (session.speaks_http2()) net::co_spawn(io_, serve_http2(session.take_http2()), net::detached);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "session ended by exception: " << e.what();
    }
  }

  net::awaitable<void> serve_http2(std::unique_ptr<Http2Handoff> handoff) {
    Http2Session session(worker_, std::move(*handoff));
    handoff.reset();
    co_await session.run();
    ++http2_ended_;
  }

  net::awaitable<void> serve_tunnel(std::unique_ptr<TunnelHandoff> handoff) {
    if (drop_tunnels_) co_return;  // as a worker whose loop ends before the tunnel starts
    TunnelSession tunnel(worker_, std::move(*handoff));
    handoff.reset();
    ++tunnels_started_;
    co_await tunnel.run();
    ++tunnels_ended_;
  }
};

}  // namespace sluice::proxy::session_test
