// (f) h2_client_bytes: a whole HTTP/2 client connection, run by the proxy's own sessions over
// loopback sockets on one io_context, as a worker runs them: DownstreamSession sees the h2c
// preface and hands the connection to Http2Session, whose streams go to a test origin that
// answers every complete HTTP/1.1 request. The client's bytes are the input (after the preface);
// the origin's answer is chosen by byte 0's low bits, and bit 2 sends the frames one at a time. Checked: what reached the origin is, on every
// connection, a sequence of well-formed HTTP/1.1 requests under sluice's own strict rules, each
// with its body whole and framed, and at most an unfinished one last; no more requests than
// the client opened streams; and when the client leaves, every session ends and no work is left
// (a coroutine or a timer still pending would be a leak).
#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>

#include "oracle/beast_head.hpp"
#include "sluice/config/loader.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/endpoint/endpoint.hpp"
#include "sluice/http/strict.hpp"
#include "sluice/proxy/downstream_session.hpp"
#include "sluice/proxy/h2_session.hpp"
#include "sluice/proxy/worker_context.hpp"
#include "sluice/runtime/snapshot.hpp"
#include "sluice/telemetry/access_log.hpp"
#include "targets/targets.hpp"

namespace sluice::fuzz {

namespace {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;

constexpr auto nothrow = net::as_tuple(net::use_awaitable);
constexpr std::string_view preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// The origin's answers (byte 0 of the input picks one): a small body, a chunked body with a
// trailer, an interim answer before a bodiless one, a body framed by the connection's close.
constexpr std::array<std::string_view, 4> answers{
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nx-t: 1\r\n\r\n",
    "HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
    "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the close",
};

// Small limits, so that short inputs reach the refusals (431, 413, too many streams).
constexpr std::string_view server_keys =
    "h2c = true\nmax_header_bytes = 4096\nmax_uri_bytes = 1024\nmax_body_bytes = 8192\n"
    "http2_max_concurrent_streams = 16\nhttp2_initial_window_bytes = 4096\nerror_detail = \"full\"\n";

// One request the origin read: its head and body parsed by Beast under sluice's strict rules
// (the oracle's head path), as far as the bytes go. Returns the bytes it took, 0 when the
// request is not complete; `problem` says what is wrong with it (and it is then 0).
std::size_t complete_request(std::string_view wire, std::string& problem) {
  const auto scan = http::scan_request_head(wire, wire.size() + 1, wire.size() + 1);
  if (scan.result == http::HeadScan::Result::need_more) return 0;
  const auto wrong = [&](std::string what) {
    problem = std::move(what);
    return std::size_t{0};
  };
  if (scan.result != http::HeadScan::Result::complete)
    return wrong("a forwarded head does not scan: " + std::string(http::describe(scan.violation)));
  if (scan.head_start != 0) return wrong("a forwarded head starts with empty lines");
  http::RequestParser parser;
  const auto rejection = http::parse_request_head(parser, wire.substr(0, scan.head_size));
  if (rejection) return wrong("a forwarded head is refused by sluice's own rules: " + std::string(rejection.reason));
  const auto& req = parser.get();
  if (req.version() != 11) return wrong("a forwarded request is not HTTP/1.1");
  if (!parser.keep_alive()) return wrong("a forwarded request closes the origin connection");
  if (req.count(bhttp::field::host) != 1) return wrong("a forwarded request without one Host");
  for (const auto f : {bhttp::field::connection, bhttp::field::keep_alive, bhttp::field::te,
                       bhttp::field::trailer, bhttp::field::upgrade, bhttp::field::proxy_connection})
    if (req.count(f) != 0) return wrong("a hop-by-hop field forwarded: " + std::string(bhttp::to_string(f)));
  std::string_view rest = wire.substr(scan.head_size);
  char buf[256];
  while (!parser.is_done()) {
    parser.get().body().data = buf;
    parser.get().body().size = sizeof buf;
    error_code ec;
    const auto used = parser.put(net::buffer(rest.data(), rest.size()), ec);
    rest.remove_prefix(used);
    if (ec == bhttp::error::need_buffer) continue;
    if (ec == bhttp::error::need_more || (!ec && used == 0)) return 0;
    if (ec) return wrong("a forwarded body does not parse: " + ec.message());
  }
  return wire.size() - rest.size();
}

// The test origin: accepts every connection, answers each complete request, records every byte.
class Origin {
public:
  struct Connection {
    explicit Connection(const tcp::acceptor::executor_type& executor) : socket(executor) {}
    tcp::socket socket;
    std::string received;
    std::size_t parsed = 0;  // the bytes of the requests answered
  };

  Origin(net::io_context& io, std::string_view answer)
      : acceptor_(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)), answer_(answer) {
    net::co_spawn(io, accept_loop(), net::detached);
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  void stop() {
    error_code ignored;
    acceptor_.close(ignored);
    for (auto& c : connections) c->socket.close(ignored);
  }
  std::size_t requests = 0;
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
    const bool closes = answer_.find("Connection: close") != std::string_view::npos;
    char buffer[16 * 1024];
    for (;;) {
      auto [ec, n] = co_await c.socket.async_read_some(net::buffer(buffer), nothrow);
      c.received.append(buffer, n);
      if (ec) co_return;
      std::string problem;  // checked once the connection is over (h2_client_bytes())
      while (const auto size = complete_request(std::string_view(c.received).substr(c.parsed), problem)) {
        c.parsed += size;
        ++requests;
        co_await net::async_write(c.socket, net::buffer(answer_), nothrow);
        if (closes) {
          error_code ignored;
          c.socket.close(ignored);
          co_return;
        }
      }
    }
  }

  tcp::acceptor acceptor_;
  std::string_view answer_;
};

// The client's frames as the frame headers delimit them (the last one perhaps cut short).
std::vector<std::string_view> frames_of(std::string_view bytes) {
  std::vector<std::string_view> frames;
  while (!bytes.empty()) {
    std::size_t size = bytes.size();
    if (bytes.size() >= 9) {
      const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
      size = std::min(size, 9 + ((std::size_t{b[0]} << 16) | (std::size_t{b[1]} << 8) | b[2]));
    }
    frames.push_back(bytes.substr(0, size));
    bytes.remove_prefix(size);
  }
  return frames;
}

// The streams the client opened: the ids of its HEADERS frames (type 1).
std::size_t streams_opened(const std::vector<std::string_view>& frames) {
  std::set<std::uint32_t> ids;
  for (const auto frame : frames) {
    if (frame.size() < 9) continue;
    const auto* b = reinterpret_cast<const unsigned char*>(frame.data());
    if (b[3] == 1)
      ids.insert(((std::uint32_t{b[5]} & 0x7f) << 24) | (std::uint32_t{b[6]} << 16) | (std::uint32_t{b[7]} << 8) | b[8]);
  }
  return ids.size();
}

// One connection's worth of everything a worker has, as a worker starts a session
// (Worker::serve, Worker::session_ended).
struct Connection {
  net::io_context io;
  ManualClock clock;
  AccessLog access{[] {
    config::LogSection log;
    log.access = config::AccessLogFormat::off;
    return log;
  }()};
  EndpointDirectory directory{clock};
  std::atomic<bool> shutdown{false};
  proxy::WorkerContext worker{0, io, clock, access};
  Origin origin;
  tcp::socket client{io};
  int running = 0;  // sessions (HTTP/1.1, then HTTP/2) whose run() has not returned

  explicit Connection(std::string_view answer) : origin(io, answer) {
    worker.shutdown = &shutdown;
    const std::string text = std::string("[server]\nlisten = [\"127.0.0.1:0\"]\n") + std::string(server_keys) +
                             "\n[upstreams.app]\n[[upstreams.app.servers]]\naddress = \"127.0.0.1:" +
                             std::to_string(origin.port()) + "\"\n";
    auto result = config::load_string(text, "h2_fuzz.toml");
    check(result.ok(), "the target's config does not load", result.ok() ? "" : result.errors[0].to_string());
    worker.snapshot = build_snapshot(std::make_shared<const config::Config>(std::move(*result.config)),
                                     directory, 1);
  }

  // The blocking calls are retried when a signal interrupts them (libFuzzer's -timeout alarm
  // comes every second).
  void start() {
    tcp::acceptor listener(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    error_code ec;
    do client.connect(listener.local_endpoint(), ec);
    while (ec == net::error::interrupted);
    check(!ec, "the client cannot connect", ec.message());
    tcp::socket server(io);
    do listener.accept(server, ec);
    while (ec == net::error::interrupted);
    check(!ec, "the listener cannot accept", ec.message());
    const auto peer = server.remote_endpoint().address();
    ++running;
    net::co_spawn(io, serve(std::move(server), peer), net::detached);
    net::co_spawn(io, drain_client(), net::detached);
  }

  // Runs what is ready, and what that makes ready, until nothing is (loopback bytes written
  // have arrived by then).
  void send(std::string_view bytes) {
    while (!bytes.empty()) {
      error_code ec;
      const auto n = net::write(client, net::buffer(bytes.data(), bytes.size()), ec);
      bytes.remove_prefix(n);
      if (ec && ec != net::error::interrupted) return;  // the session closed: the rest is not read
    }
  }

  void settle() {
    for (int quiet = 0; quiet < 2;) {
      io.restart();
      quiet = io.poll() == 0 ? quiet + 1 : 0;
    }
  }

  // As Worker::stop() and join(): every session closed and its coroutine run to its end, the
  // peers' too, before the worker's context goes.
  void end() {
    error_code ignored;
    client.close(ignored);
    for (int i = 0; i < 200 && running != 0; ++i) settle_for(1ms);
    const bool ended_alone = running == 0;  // the client's close ended every session
    // Closed anyway before any check can throw: nothing may outlive the worker's context.
    for (auto it = worker.sessions.begin(); it != worker.sessions.end();) (it++)->close();
    origin.stop();
    for (int i = 0; i < 400 && !io.stopped(); ++i) settle_for(5ms);
    check(ended_alone, "a session outlives its client");
    check(io.stopped() && worker.sessions.empty(), "work is left after every session ended");
  }

private:
  void settle_for(std::chrono::milliseconds d) {
    io.restart();
    io.run_for(d);
  }

  // The client reads (and drops) what comes back, so that the session is never stuck writing.
  net::awaitable<void> drain_client() {
    char buffer[16 * 1024];
    for (;;) {
      auto [ec, n] = co_await client.async_read_some(net::buffer(buffer), nothrow);
      if (ec) co_return;
    }
  }

  net::awaitable<void> serve(tcp::socket socket, net::ip::address peer) {
    std::unique_ptr<proxy::Http2Handoff> handoff;
    {
      proxy::DownstreamSession session(worker, tls::Stream(std::move(socket)), peer);
      co_await session.run();
      if (session.speaks_http2()) handoff = session.take_http2();
    }
    if (handoff != nullptr) {
      proxy::Http2Session session(worker, std::move(*handoff));
      handoff.reset();
      co_await session.run();
    }
    --running;
  }
};

}  // namespace

void h2_client_bytes(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto frames = frames_of(bytes);
  Connection c(answers[data[0] % answers.size()]);
  c.start();
  c.send(preface);
  if ((data[0] & 4) == 0) {
    c.send(bytes);  // loopback takes 16 KiB at once
    c.settle();
  } else {
    // A frame at a time, each taken in before the next: bodies stream, resets come mid-request.
    for (const auto frame : frames) {
      c.settle();
      c.send(frame);
    }
    c.settle();
  }
  const auto opened = streams_opened(frames);
  c.end();
  check(c.origin.requests <= opened, "more requests reached the origin than the client opened streams");
  for (const auto& conn : c.origin.connections) {
    std::string problem;
    std::string_view rest = conn->received;
    while (const auto n = complete_request(rest, problem)) rest.remove_prefix(n);
    check(problem.empty(), problem, conn->received);
    // What follows the requests can only be one request cut short (its stream reset, or the
    // client gone).
    check(rest.size() == conn->received.size() - conn->parsed, "a complete request the origin never answered");
  }
}

}  // namespace sluice::fuzz
