#include "sluice/health/prober.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <tuple>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <spdlog/spdlog.h>

#include "sluice/config/expect_status.hpp"
#include "sluice/health/grpc_probe.hpp"
#include "sluice/health/schedule.hpp"
#include "sluice/tls/stream.hpp"

namespace sluice::health {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);

constexpr std::uint32_t head_limit = 16 * 1024;   // response head; more is a bad response
constexpr std::size_t body_limit = 64 * 1024;      // body bytes read (and searched) per probe
constexpr std::size_t body_chunk = 4 * 1024;       // bytes handed to the parser at a time
constexpr unsigned max_interim = 8;                // 1xx responses skipped before the final one
// A zero interval would make the schedule loop spin; validation requires timeout < interval, so
// this only guards against a config built by hand.
constexpr Clock::duration min_interval = std::chrono::milliseconds(1);

using Parser = bhttp::response_parser<bhttp::buffer_body>;

ProbeResult failed(std::string detail) { return {false, std::move(detail), {}}; }

std::string connect_detail(const error_code& ec, bool timed_out) {
  if (timed_out) return "connect timeout";
  if (ec == net::error::connection_refused) return "connect refused";
  return "connect error: " + ec.message();
}

// After the connection was made: what a failed write or read means for the reason string.
std::string exchange_detail(const error_code& ec, bool timed_out) {
  if (timed_out) return "timeout";
  if (ec == net::error::connection_reset || ec == net::error::broken_pipe ||
      ec == net::error::connection_aborted)
    return "connection reset";
  if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
      ec == net::error::eof)
    return "connection closed";
  if (ec.category() == bhttp::make_error_code(bhttp::error::bad_version).category())
    return "bad response";
  return "error: " + ec.message();
}

}  // namespace

struct Prober::Settings {
  config::HealthCheckConfig config;
  bool head = false;  // HEAD: the response has no body whatever its framing says (RFC 9110 §9.3.2)
};

struct Prober::Server {
  Server(net::io_context& io, ProbeTarget t, std::shared_ptr<const Settings> s, std::uint64_t seed)
      : target(std::move(t)),
        settings(std::move(s)),
        schedule(std::max<Clock::duration>(settings->config.interval, min_interval),
                 settings->config.jitter, seed),
        socket(io.get_executor()),
        wait_timer(io),
        deadline_timer(io) {}

  ProbeTarget target;
  std::shared_ptr<const Settings> settings;
  ProbeSchedule schedule;
  Clock::time_point due{};  // next scheduled probe
  tls::Stream socket;       // the keep-alive connection (plain or TLS), when open
  net::steady_timer wait_timer;
  net::steady_timer deadline_timer;  // wakes the probe at its deadline (arm_deadline)
  Clock::time_point deadline{};      // the current probe's timeout, on the prober's clock
  std::uint64_t probe_seq = 0;       // tells a stale deadline handler from the current one
  bool timed_out = false;            // the current probe's deadline fired
  bool drop_connection = false;      // a reload changed where probes go
  bool stopped = false;              // removed: the loop exits, nothing is reported any more
};

namespace {

// Where probes go: the server's address, or the same host on [health].port.
tcp::endpoint probe_address(const ProbeTarget& target, const config::HealthCheckConfig& config) {
  auto address = target.endpoint->socket_address();
  if (config.port != 0) address.port(config.port);
  return address;
}

// The probe's Host (HTTP/1.1) or :authority (gRPC).
const std::string& probe_host(const ProbeTarget& target, const config::HealthCheckConfig& config) {
  return config.host.empty() ? target.endpoint->address_text() : config.host;
}

std::string probe_request(const ProbeTarget& target, const config::HealthCheckConfig& config) {
  const std::string& host = probe_host(target, config);
  std::string r;
  const std::string_view method = config::name_of(config.method);
  r.reserve(method.size() + config.path.size() + host.size() + 80);
  r.append(method).append(" ").append(config.path).append(" HTTP/1.1\r\n");
  r.append("Host: ").append(host).append("\r\n");
  // HTTP/1.1 is persistent by default (RFC 9112 §9.3); said anyway for HTTP/1.0-minded origins.
  r.append("User-Agent: sluice-health\r\nConnection: keep-alive\r\n\r\n");
  return r;
}

}  // namespace

Prober::Prober(net::io_context& control, const Clock& clock, std::uint64_t seed)
    : control_(control), clock_(clock), seed_(seed) {}

Prober::~Prober() { stop(); }

std::size_t Prober::server_count() const noexcept {
  std::size_t n = 0;
  for (const auto& [name, servers] : upstreams_) n += servers.size();
  return n;
}

void Prober::set_upstream(const std::string& name, const config::HealthCheckConfig& config,
                          std::vector<ProbeTarget> targets) {
  rates_[name] = static_cast<double>(targets.size()) /
                 std::max(0.001, std::chrono::duration<double>(config.interval).count());
  update_pacer();
  auto settings = std::make_shared<Settings>();
  settings->config = config;
  settings->head = config.method == config::ProbeMethod::head;

  auto& current = upstreams_[name];
  std::vector<std::shared_ptr<Server>> next;
  next.reserve(targets.size());
  const auto now = clock_.now();
  for (auto& target : targets) {
    if (!target.endpoint || target.health == nullptr) continue;
    const Endpoint* endpoint = target.endpoint.get();
    const auto same = [endpoint](const std::shared_ptr<Server>& s) {
      return s != nullptr && s->target.endpoint.get() == endpoint;
    };
    if (std::any_of(next.begin(), next.end(), same)) continue;  // listed twice: one probe loop

    const auto kept = std::find_if(current.begin(), current.end(), same);
    if (kept == current.end()) {
      const auto seed = ProbeSchedule::seed_for(endpoint->identity(), seed_);
      auto server = std::make_shared<Server>(control_, std::move(target), settings, seed);
      server->due = server->schedule.first(now);
      start(server);
      next.push_back(std::move(server));
      continue;
    }

    // Same endpoint object: the same server, so its schedule and connection carry over.
    auto server = std::move(*kept);
    const auto& old = server->settings->config;
    if (old.interval != config.interval || old.jitter != config.jitter) {
      server->schedule =
          ProbeSchedule(std::max<Clock::duration>(config.interval, min_interval), config.jitter,
                        ProbeSchedule::seed_for(endpoint->identity(), seed_));
      server->due = server->schedule.first(now);
      server->wait_timer.cancel();  // the loop re-reads `due`
    }
    if (old.port != config.port) server->drop_connection = true;
    // New TLS settings (every reload builds a new context): reconnect with them.
    if (server->target.tls != target.tls) server->drop_connection = true;
    server->target = std::move(target);
    server->settings = settings;
    next.push_back(std::move(server));
  }
  for (auto& gone : current)
    if (gone) halt(*gone);
  current = std::move(next);
}

void Prober::remove_upstream(const std::string& name) {
  const auto it = upstreams_.find(name);
  if (it == upstreams_.end()) return;
  for (auto& server : it->second) halt(*server);
  upstreams_.erase(it);
  rates_.erase(name);
  update_pacer();
}

void Prober::update_pacer() {
  double rate = 0;
  for (const auto& [name, r] : rates_) rate += r;
  pacer_.set_cap(ProbePacer::cap_for(rate, pacer_.window()));
}

void Prober::stop() {
  for (auto& [name, servers] : upstreams_)
    for (auto& server : servers) halt(*server);
  upstreams_.clear();
}

void Prober::start(std::shared_ptr<Server> server) {
  net::co_spawn(control_, run(std::move(server)), [](std::exception_ptr e) {
    // run() catches per probe; reaching here means the loop itself failed (e.g. out of memory).
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      spdlog::error("health prober: probe loop ended: {}", x.what());
    } catch (...) {
      spdlog::error("health prober: probe loop ended");
    }
  });
}

// Ends a server's loop: whatever it is waiting for completes with operation_aborted, and the loop
// sees `stopped` before touching the prober, the health object or a callback again.
void Prober::halt(Server& server) noexcept {
  server.stopped = true;
  server.wait_timer.cancel();
  server.deadline_timer.cancel();
  error_code ignored;
  server.socket.close(ignored);
}

// The probe loop of one server. Holds the Server alive; `this` and target.health are used only
// while !stopped (halt() runs before either may go away).
net::awaitable<void> Prober::run(std::shared_ptr<Server> server) {
  Server& s = *server;
  while (!s.stopped) {
    try {
      const auto now = clock_.now();
      if (now < s.due) {
        // On the grid: probes due close together share one timer expiry (one wake-up).
        // (Relative to `now`: the clock may be a test's manual clock, the timer's is steady.)
        s.wait_timer.expires_after(align_up(s.due, probe_grid) - now);
        co_await s.wait_timer.async_wait(nothrow);
        continue;  // woken by time, a reload that moved `due`, or halt(): look again
      }
      // The next slot counts from this one's scheduled time, not from when the probe ends.
      s.due = s.schedule.next(s.due);
      if (may_probe && !may_probe(s.target)) continue;  // another instance probes it
      // Across servers, the pacer flattens bursts: this probe may have to wait a little.
      if (const auto start = pacer_.admit(now); start > now) {
        s.wait_timer.expires_after(start - now);
        co_await s.wait_timer.async_wait(nothrow);
        if (s.stopped) break;
      }
      const auto started = clock_.now();
      auto result = co_await probe_once(server, clock_);
      if (s.stopped) break;
      const auto end = clock_.now();
      result.latency = end - started;
      // A probe that overran its next slot: skip the slot rather than probe back to back.
      while (s.due <= end) s.due = s.schedule.next(s.due);
      report(s, std::move(result));
    } catch (const std::exception& e) {
      spdlog::error("upstream {} server {}: health probe: {}", s.target.upstream,
                    s.target.endpoint->address_text(), e.what());
      error_code ignored;
      s.socket.close(ignored);
    }
  }
}

// The timer only wakes the probe up; `clock` says whether the deadline has come. With the steady
// clock it has whenever the timer fires; a clock that moves on its own terms (a test's manual
// clock) may not have reached it yet, and the timer waits again for what is left.
void Prober::arm_deadline(std::shared_ptr<Server> server, std::uint64_t seq, const Clock& clock,
                          Clock::duration wait) {
  server->deadline_timer.expires_after(wait);
  server->deadline_timer.async_wait([server, seq, &clock](error_code ec) {
    if (ec || server->probe_seq != seq || server->stopped) return;
    if (const auto now = clock.now(); now < server->deadline) {
      arm_deadline(server, seq, clock, server->deadline - now);
      return;
    }
    server->timed_out = true;
    error_code ignored;
    server->socket.close(ignored);
  });
}

bool Prober::apply_verdict(std::string_view upstream, std::string_view server, ProbeResult result) {
  const auto it = upstreams_.find(upstream);
  if (it == upstreams_.end()) return false;
  for (const auto& s : it->second) {
    if (s->stopped || s->target.endpoint->identity() != server) continue;
    report(*s, std::move(result));
    return true;
  }
  return false;
}

void Prober::report(Server& s, ProbeResult result) {
  const auto transition = s.target.health->probe_result(result);
  if (on_probe) on_probe(s.target, result);
  if (transition && on_transition) on_transition(s.target, *transition);
}

// One probe's exchange on its server's connection, in the order probe_once takes its steps. A
// step that ends the probe returns its result (the connection closed unless it may serve the
// next probe); std::nullopt goes on to the next step.
struct Prober::Probe {
  using Step = net::awaitable<std::optional<ProbeResult>>;

  Probe(Server& server, const Settings& probe_settings) : s(server), settings(probe_settings) {}

  Server& s;
  const Settings& settings;
  beast::flat_buffer buffer{head_limit + body_chunk};
  std::optional<Parser> parser;

  void close() {
    error_code ignored;
    s.socket.close(ignored);
  }

  ProbeResult fail(std::string detail) {
    close();
    return failed(std::move(detail));
  }

  // Reads the next response head into a fresh parser. Returns the error and whether any byte of
  // the response had arrived.
  net::awaitable<std::pair<error_code, bool>> read_head() {
    parser.emplace();
    parser->header_limit(head_limit);
    parser->skip(settings.head);
    const auto [ec, used] = co_await bhttp::async_read_header(s.socket, buffer, *parser, nothrow);
    co_return std::pair{ec, used != 0 || buffer.size() != 0};
  }

  // A new connection, TLS or not: TLS state never carries over from an earlier one. `h2`: TLS
  // must choose HTTP/2 by ALPN (a gRPC probe).
  Step connect(const tcp::endpoint& address, bool h2 = false) {
    s.socket = tls::Stream(s.socket.get_executor());
    const auto [ec] = co_await s.socket.socket().async_connect(address, nothrow);
    if (s.stopped) co_return ProbeResult{};
    if (ec) co_return fail(connect_detail(ec, s.timed_out));
    if (!s.target.tls) co_return std::nullopt;
    s.socket.start_tls(s.target.tls->context());
    SSL* ssl = s.socket.tls()->native_handle();
    if (!s.target.tls->prepare(ssl, s.target.tls_server_name))  // never probe unverified
      co_return fail("tls handshake failed: bad server name '" + s.target.tls_server_name + "'");
    static constexpr unsigned char alpn_h2[] = {2, 'h', '2'};
    if (h2 && SSL_set_alpn_protos(ssl, alpn_h2, sizeof alpn_h2) != 0) co_return fail("tls: cannot offer h2 by ALPN");
    const auto [hec] = co_await s.socket.async_handshake(net::ssl::stream_base::client, nothrow);
    if (s.stopped) co_return ProbeResult{};
    if (!hec && h2) {
      const unsigned char* chosen = nullptr;
      unsigned chosen_len = 0;
      SSL_get0_alpn_selected(ssl, &chosen, &chosen_len);
      if (std::string_view(reinterpret_cast<const char*>(chosen), chosen_len) != "h2")
        co_return fail("tls: the server did not choose h2 by ALPN");
    }
    if (!hec) co_return std::nullopt;
    const char* why = tls::verify_error(ssl);
    if (s.timed_out) co_return fail("timeout");
    co_return fail(why != nullptr ? std::string("certificate verify failed: ") + why
                                  : "tls handshake failed: " + hec.message());
  }

  // The request written and the first response head read. At most two rounds: a kept connection
  // that fails before any response byte was most likely closed by the origin while idle, so the
  // probe retries once on a new connection.
  Step send(const std::string& request, const tcp::endpoint& address) {
    for (;;) {
      const bool reused = s.socket.is_open();
      if (!reused)
        if (auto end = co_await connect(address)) co_return end;
      auto [ec, written] = co_await net::async_write(s.socket, net::buffer(request), nothrow);
      if (s.stopped) co_return ProbeResult{};
      bool received = false;
      if (!ec) {
        std::tie(ec, received) = co_await read_head();
        if (s.stopped) co_return ProbeResult{};
        if (!ec) co_return std::nullopt;
      }
      close();
      if (reused && !received && !s.timed_out) continue;
      co_return failed(exchange_detail(ec, s.timed_out));
    }
  }

  // Interim responses (RFC 9110 §15.2) precede the final one; 101 would end HTTP on this
  // connection, so it is the final answer (and the connection is not kept).
  Step skip_interim() {
    for (unsigned interim = 0;; ++interim) {
      const unsigned status = parser->get().result_int();
      if (status < 100 || status >= 200 || status == 101) co_return std::nullopt;
      if (interim == max_interim) co_return fail("bad response");
      const auto [ec, received] = co_await read_head();
      if (s.stopped) co_return ProbeResult{};
      if (ec) co_return fail(exchange_detail(ec, s.timed_out));
    }
  }

  // The body: kept in `body` within its first body_limit bytes when `want_body` (expect_body
  // searches it), and read to its end (up to that limit) so that the connection can serve the
  // next probe.
  Step read_body(bool want_body, std::string& body) {
    std::size_t body_bytes = 0;
    char chunk[body_chunk];
    while (!parser->is_done() && body_bytes < body_limit) {
      parser->get().body().data = chunk;
      parser->get().body().size = sizeof chunk;
      auto [ec, used] = co_await bhttp::async_read(s.socket, buffer, *parser, nothrow);
      if (s.stopped) co_return ProbeResult{};
      if (ec == bhttp::error::need_buffer) ec = {};  // the chunk is full, not an error
      const std::size_t got = sizeof chunk - parser->get().body().size;
      if (want_body) body.append(chunk, std::min(got, body_limit - std::min(body_limit, body_bytes)));
      body_bytes += got;
      if (ec) co_return fail(exchange_detail(ec, s.timed_out));
    }
    co_return std::nullopt;
  }

  // A gRPC health check, on a connection of its own, closed after it: no HTTP/2 connection state
  // is kept between probes.
  net::awaitable<ProbeResult> grpc(const tcp::endpoint& address, const std::string& authority) {
    close();
    if (auto end = co_await connect(address, true)) co_return *end;
    error_code ec;
    const auto answer = co_await grpc_health_call(s.socket, authority, settings.config.service,
                                                  s.target.tls != nullptr, ec);
    if (s.stopped) co_return ProbeResult{};
    close();
    if (s.timed_out) co_return failed("timeout");
    if (ec && !answer.complete) co_return failed(exchange_detail(ec, false));
    co_return judge_grpc_health(answer);
  }

  // The whole answer is in: the connection kept or not, and the verdict on status and body.
  ProbeResult judge(const std::string& body) {
    if (s.timed_out) return fail("timeout");  // the whole answer came, but not within the timeout
    const unsigned status = parser->get().result_int();
    // Kept only when this response is complete and nothing else arrived with it.
    if (!parser->is_done() || !parser->keep_alive() || buffer.size() != 0 || status == 101) close();
    const auto& config = settings.config;
    if (!config.expect_status.match(status))
      return failed("status " + std::to_string(status) + " not in " + config.expect_status.to_string());
    if (!config.expect_body.empty() && body.find(config.expect_body) == std::string::npos)
      return failed("body does not contain '" + config.expect_body + "'");
    return ProbeResult{true, {}, {}};
  }
};

net::awaitable<ProbeResult> Prober::probe_once(std::shared_ptr<Server> server,
                                               const Clock& clock) {
  Server& s = *server;
  // A reload during this probe applies from the next one.
  const std::shared_ptr<const Settings> settings = s.settings;
  const auto& config = settings->config;
  const std::string request = probe_request(s.target, config);
  const auto address = probe_address(s.target, config);

  // The deadline covers the whole probe: connect, a reconnect, write and read. Reaching it closes
  // the socket, which fails whatever operation is pending.
  const auto seq = ++s.probe_seq;
  s.timed_out = false;
  s.deadline = clock.now() + config.timeout;
  arm_deadline(server, seq, clock, config.timeout);
  struct Disarm {  // however the probe ends
    Server& s;
    ~Disarm() {
      ++s.probe_seq;
      s.deadline_timer.cancel();
    }
  } disarm{s};

  Probe probe(s, *settings);
  if (s.drop_connection) {
    probe.close();
    s.drop_connection = false;
  }
  if (config.protocol == config::ProbeProtocol::grpc) co_return co_await probe.grpc(address, probe_host(s.target, config));
  if (auto end = co_await probe.send(request, address)) co_return *end;
  if (auto end = co_await probe.skip_interim()) co_return *end;
  std::string body;
  if (auto end = co_await probe.read_body(!config.expect_body.empty(), body)) co_return *end;
  co_return probe.judge(body);
}

}  // namespace sluice::health
