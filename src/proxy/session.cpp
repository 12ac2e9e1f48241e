#include "sluice/proxy/session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <spdlog/spdlog.h>

#include "sluice/http/rewrite.hpp"
#include "sluice/http/strict.hpp"

namespace sluice::proxy {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);
constexpr std::size_t relay_size = 64 * 1024;  // body bytes moved per read/write step
constexpr std::size_t read_chunk = 16 * 1024;  // bytes asked of the socket while reading a head

// Room to read into `buffer` without exceeding its max_size.
net::mutable_buffer prepare_some(beast::flat_buffer& buffer) {
  const auto room = buffer.max_size() - buffer.size();
  return buffer.prepare(std::min(room, read_chunk));
}

bool is_idempotent_without_body(const bhttp::request_parser<bhttp::buffer_body>& p) {
  const auto m = p.get().method();
  const bool idempotent = m == bhttp::verb::get || m == bhttp::verb::head ||
                          m == bhttp::verb::options || m == bhttp::verb::trace ||
                          m == bhttp::verb::put || m == bhttp::verb::delete_;
  return idempotent && p.is_done();
}

bool iequals_ascii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
    if (x >= 'A' && x <= 'Z') x += 32;
    if (y >= 'A' && y <= 'Z') y += 32;
    if (x != y) return false;
  }
  return true;
}

// For absolute-form targets ("http://host/path", RFC 9112 §3.2.2) the route uses the path.
std::string_view path_of(std::string_view target) {
  if (!target.empty() && target.front() == '/') return target;
  const auto scheme = target.find("://");
  if (scheme == std::string_view::npos) return target;
  const auto slash = target.find('/', scheme + 3);
  return slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
}

// Decrements the endpoint's in-flight count when an attempt ends, however it ends.
class InFlight {
public:
  explicit InFlight(Endpoint& e) : e_(&e) { e_->begin_request(); }
  ~InFlight() { e_->end_request(); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

private:
  Endpoint* e_;
};

}  // namespace

// Per-request state: lives on run()'s coroutine frame for the duration of one exchange.
struct Session::Exchange {
  Clock::time_point start;
  char id_storage[37];
  std::string_view request_id;
  const Upstream* upstream = nullptr;
  const Endpoint* server = nullptr;
  unsigned status = 0;
  unsigned attempts = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  std::string_view error;
  bool client_keep_alive = false;
  bool head_sent = false;  // response head reached the client: no error page possible any more
};

Session::Session(WorkerContext& worker, tcp::socket socket)
    : worker_(worker), client_(std::move(socket)) {
  error_code ec;
  const auto remote = client_.socket().remote_endpoint(ec);
  if (!ec) client_ip_ = remote.address().to_string();
  client_.socket().set_option(tcp::no_delay(true), ec);
  worker_.sessions.push_back(*this);
}

Session::~Session() {
  if (is_linked()) worker_.sessions.erase(worker_.sessions.iterator_to(*this));
}

void Session::close_if_idle() {
  if (idle_) close();
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  error_code ignored;
  client_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  client_.socket().close(ignored);
}

net::awaitable<void> Session::run() {
  const auto& limits = worker_.snapshot->config->server;
  // The head buffer is bounded: a client cannot make us hold more than a head plus one read.
  in_ = beast::flat_buffer(limits.max_header_bytes + read_chunk);
  up_in_ = beast::flat_buffer(limits.max_header_bytes + read_chunk);
  while (!closed_) {
    ProxyError error;
    const auto head = co_await read_request_head(error);
    if (head == HeadResult::closed) break;
    if (head == HeadResult::error) {
      co_await send_error(nullptr, error);
      break;
    }
    Exchange x;
    x.start = worker_.clock.now();
    const bool keep = co_await handle_request(x);
    log_exchange(x);
    request_.reset();
    response_.reset();
    if (!keep || worker_.stopping) break;
  }
  if (!closed_) {
    // Half-close so that a client still sending (a body we refused) sees our answer, not a reset.
    error_code ignored;
    client_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    close();
  }
}

net::awaitable<Session::HeadResult> Session::read_request_head(ProxyError& error) {
  const auto& limits = snapshot_ ? snapshot_->config->server : worker_.snapshot->config->server;
  // Idle between requests: idle_timeout until the first byte, then header_timeout for the whole
  // head. A new connection gets header_timeout from the start (slowloris protection).
  idle_ = in_.size() == 0;
  client_.expires_after(first_request_ || !idle_ ? limits.header_timeout : limits.idle_timeout);
  first_request_ = false;
  for (;;) {
    // RFC 9112 §2.2: ignore at least one empty line before a request-line.
    while (in_.size() >= 2 && static_cast<const char*>(in_.data().data())[0] == '\r' &&
           static_cast<const char*>(in_.data().data())[1] == '\n')
      in_.consume(2);
    const std::string_view bytes(static_cast<const char*>(in_.data().data()), in_.size());
    const auto scan = http::scan_request_head(bytes, limits.max_header_bytes, limits.max_uri_bytes);
    if (scan.result == http::HeadScan::Result::invalid) {
      error = {http::status_for(scan.violation), http::describe(scan.violation)};
      co_return HeadResult::error;
    }
    if (scan.result == http::HeadScan::Result::complete) {
      idle_ = false;
      snapshot_ = worker_.snapshot;  // this request runs on the newest config
      request_.emplace();
      request_->header_limit(static_cast<std::uint32_t>(scan.head_size + 1));
      request_->body_limit(boost::none);  // enforced here, against max_body_bytes
      error_code ec;
      const auto used = request_->put(net::buffer(bytes.data(), scan.head_size), ec);
      if (ec || !request_->is_header_done() || used != scan.head_size) {
        const auto v = http::violation_from_parser_error(ec, bytes.substr(0, scan.head_size));
        error = {400, v == http::Violation::none ? "bad request" : http::describe(v)};
        co_return HeadResult::error;
      }
      in_.consume(used);
      const auto v = http::check_request_fields(request_->get(), request_->get().version());
      if (v != http::Violation::none) {
        error = {http::status_for(v), http::describe(v)};
        co_return HeadResult::error;
      }
      co_return HeadResult::ok;
    }
    if (worker_.stopping && idle_) co_return HeadResult::closed;
    const auto [ec, n] = co_await client_.async_read_some(prepare_some(in_), nothrow);
    in_.commit(n);
    if (ec) {
      if (ec == beast::error::timeout && in_.size() > 0) {
        error = {408, "header timeout"};
        co_return HeadResult::error;
      }
      co_return HeadResult::closed;  // EOF, reset, idle timeout or shutdown: nothing to answer
    }
    if (idle_ && n > 0) {
      idle_ = false;
      client_.expires_after(limits.header_timeout);
    }
  }
}

net::awaitable<bool> Session::handle_request(Exchange& x) {
  auto& req = request_->get();
  const auto& limits = snapshot_->config->server;
  x.request_id = http::choose_request_id(req, worker_.ids, x.id_storage);
  x.client_keep_alive = request_->keep_alive();

  if (const auto cl = request_->content_length();
      cl && limits.max_body_bytes != 0 && *cl > limits.max_body_bytes) {
    co_await send_error(&x, {413, "body too large"});
    co_return false;
  }
  x.upstream = snapshot_->router.route(req[bhttp::field::host], path_of(req.target()));
  if (x.upstream == nullptr) {
    co_await send_error(&x, {404, "no route"});
    // A body we did not read would be taken for the next request: close instead.
    co_return request_->is_done() && x.client_keep_alive;
  }
  co_return co_await forward(x);
}

net::awaitable<bool> Session::forward(Exchange& x) {
  auto& req = request_->get();
  const auto& limits = snapshot_->config->server;
  const auto& ucfg = x.upstream->config();
  if (!relay_) relay_ = std::make_unique<char[]>(relay_size);

  // Expect: 100-continue is answered here, hop by hop, when we start reading the body.
  bool expect_continue = false;
  if (const auto e = req[bhttp::field::expect]; !e.empty()) {
    expect_continue = iequals_ascii(e, "100-continue") && req.version() == 11 && !request_->is_done();
    req.erase(bhttp::field::expect);
  }
  const bool is_head = req.method() == bhttp::verb::head;
  const bool chunked_in = request_->chunked();
  const unsigned client_version = req.version();
  http::rewrite_request(req, {client_ip_, "http", x.request_id});
  req.version(11);
  if (chunked_in) req.chunked(true);

  TriedSet tried;
  PickContext ctx{&tried};
  const auto pick = x.upstream->pick(ctx);
  if (!pick) {
    co_await send_error(&x, {503, "no server available"});
    co_return request_->is_done() && x.client_keep_alive;
  }
  Endpoint& ep = *x.upstream->endpoint(pick.index);
  x.server = &ep;
  InFlight in_flight(ep);

  // A pooled connection that the origin closed while idle can fail before any response byte; when
  // resending cannot duplicate work (idempotent, no body), we try once more on a fresh connection.
  auto upstream = worker_.pool.acquire(ep);
  bool reused = upstream.has_value();
  for (;;) {
    ++x.attempts;
    if (!upstream) {
      upstream.emplace(worker_.io);
      upstream->expires_after(ucfg.connect_timeout);
      const auto [ec] = co_await upstream->async_connect(ep.socket_address(), nothrow);
      if (ec) {
        const auto f = ec == beast::error::timeout           ? UpstreamFailure::connect_timeout
                       : ec == net::error::connection_refused ? UpstreamFailure::connect_refused
                                                              : UpstreamFailure::connect_error;
        spdlog::debug("upstream {} server {}: {}: {}", x.upstream->name(), ep.identity(), describe(f),
                      ec.message());
        co_await send_error(&x, {status_for(f), describe(f)});
        co_return false;
      }
      error_code ignored;
      upstream->socket().set_option(tcp::no_delay(true), ignored);
    }

    // Request: head, then the body relayed from the client through relay_.
    bhttp::serializer<true, bhttp::buffer_body> sr{req};
    std::uint64_t sent = 0;
    UpstreamFailure failure = UpstreamFailure::none;
    bool continue_sent = false;
    do {
      auto& body = req.body();
      if (!request_->is_done()) {
        if (expect_continue && !continue_sent) {
          continue_sent = true;
          static constexpr std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
          client_.expires_after(limits.idle_timeout);
          const auto [ec, n] = co_await net::async_write(client_, net::buffer(cont), nothrow);
          if (ec) co_return false;
        }
        body.data = relay_.get();
        body.size = relay_size;
        client_.expires_after(limits.idle_timeout);
        auto [ec, n] = co_await bhttp::async_read_some(client_, in_, *request_, nothrow);
        if (ec == bhttp::error::need_buffer) ec = {};
        if (ec) {
          if (const auto v = http::violation_from_parser_error(ec); v != http::Violation::none) {
            co_await send_error(&x, {400, http::describe(v)});
          } else if (ec == beast::error::timeout) {
            co_await send_error(&x, {408, "body timeout"});
          }
          co_return false;  // the client went away or broke framing: nothing is reused
        }
        body.size = relay_size - body.size;
        body.data = relay_.get();
        body.more = !request_->is_done();
        x.bytes_in += body.size;
        if (limits.max_body_bytes != 0 && x.bytes_in > limits.max_body_bytes) {
          co_await send_error(&x, {413, "body too large"});
          co_return false;
        }
        if (body.size == 0 && body.more) continue;  // only framing was parsed (chunk header)
      } else {
        body.data = nullptr;
        body.size = 0;
        body.more = false;
      }
      upstream->expires_after(ucfg.response_timeout);
      auto [ec, n] = co_await bhttp::async_write(*upstream, sr, nothrow);
      if (ec == bhttp::error::need_buffer) ec = {};
      sent += n;
      if (ec) {
        failure = sent == 0 ? UpstreamFailure::reset_before_send : UpstreamFailure::reset_after_send;
        break;
      }
    } while (!sr.is_done());

    // Response head (and any 1xx before it).
    std::size_t received = 0;
    if (failure == UpstreamFailure::none) {
      upstream->expires_after(ucfg.response_timeout);
      for (;;) {
        const std::string_view bytes(static_cast<const char*>(up_in_.data().data()), up_in_.size());
        const auto scan = http::scan_response_head(bytes, limits.max_header_bytes);
        if (scan.result == http::HeadScan::Result::invalid) {
          failure = UpstreamFailure::bad_response;
          break;
        }
        if (scan.result == http::HeadScan::Result::complete) {
          response_.emplace();
          response_->header_limit(static_cast<std::uint32_t>(scan.head_size + 1));
          response_->body_limit(boost::none);
          if (is_head) response_->skip(true);
          error_code ec;
          const auto used = response_->put(net::buffer(bytes.data(), scan.head_size), ec);
          if (ec || !response_->is_header_done() || used != scan.head_size ||
              http::check_response_fields(response_->get(), response_->get().version()) !=
                  http::Violation::none) {
            failure = UpstreamFailure::bad_response;
            break;
          }
          up_in_.consume(used);
          const auto code = response_->get().result_int();
          if (code >= 100 && code < 200) {
            if (code == 101) {  // we never forward Upgrade, so a switch is a protocol error
              failure = UpstreamFailure::bad_response;
              break;
            }
            // 100 answered our own request framing; other 1xx go to HTTP/1.1 clients as they are.
            if (code != 100 && client_version == 11) {
              bhttp::serializer<false, bhttp::buffer_body> info{response_->get()};
              client_.expires_after(limits.idle_timeout);
              auto [ec1, n1] = co_await bhttp::async_write_header(client_, info, nothrow);
              if (ec1) co_return false;
            }
            response_.reset();
            continue;
          }
          break;
        }
        const auto [ec, n] = co_await upstream->async_read_some(prepare_some(up_in_), nothrow);
        up_in_.commit(n);
        received += n;
        if (ec) {
          failure = ec == beast::error::timeout ? UpstreamFailure::response_timeout
                    : received == 0 && sent == 0 ? UpstreamFailure::reset_before_send
                                                 : UpstreamFailure::reset_after_send;
          break;
        }
      }
    }

    if (failure != UpstreamFailure::none) {
      up_in_.clear();
      response_.reset();
      const bool stale = reused && received == 0 && failure != UpstreamFailure::response_timeout &&
                         failure != UpstreamFailure::bad_response;
      if (stale && is_idempotent_without_body(*request_) && x.attempts < 2) {
        spdlog::debug("upstream {} server {}: pooled connection was closed, reconnecting",
                      x.upstream->name(), ep.identity());
        upstream.reset();
        reused = false;
        continue;
      }
      spdlog::debug("upstream {} server {}: {}", x.upstream->name(), ep.identity(), describe(failure));
      co_await send_error(&x, {status_for(failure), describe(failure)});
      co_return false;
    }
    break;
  }

  // Response head towards the client.
  auto& res = response_->get();
  x.status = res.result_int();
  const bool body_expected = !is_head && x.status != 204 && x.status != 304;
  const bool upstream_keep_alive = response_->keep_alive();
  const bool chunked_out = response_->chunked();
  const bool length_known = response_->content_length().has_value();
  http::rewrite_response(res, x.request_id);
  bool keep = x.client_keep_alive && !worker_.stopping;
  if (body_expected && (chunked_out || !length_known)) {
    // Unknown length: re-chunk for HTTP/1.1 clients; HTTP/1.0 clients read until close.
    if (client_version == 11) res.chunked(true);
    else keep = false;
  }
  res.version(11);
  res.keep_alive(keep);
  if (keep && client_version == 10) res.set(bhttp::field::connection, "keep-alive");

  bhttp::serializer<false, bhttp::buffer_body> sw{res};
  bool client_failed = false;
  do {
    auto& body = res.body();
    if (!response_->is_done()) {
      body.data = relay_.get();
      body.size = relay_size;
      upstream->expires_after(ucfg.response_timeout);
      auto [ec, n] = co_await bhttp::async_read_some(*upstream, up_in_, *response_, nothrow);
      if (ec == bhttp::error::need_buffer) ec = {};
      // A close-delimited body ends with EOF: Beast reports it as done, not as an error.
      if (ec) {
        spdlog::debug("upstream {} server {}: response body failed: {}", x.upstream->name(),
                      ep.identity(), ec.message());
        if (!x.head_sent) {
          co_await send_error(&x, {502, describe(UpstreamFailure::reset_after_send)});
        }
        co_return false;
      }
      body.size = relay_size - body.size;
      body.data = relay_.get();
      body.more = !response_->is_done();
      if (body.size == 0 && body.more) continue;
    } else {
      body.data = nullptr;
      body.size = 0;
      body.more = false;
    }
    client_.expires_after(limits.idle_timeout);
    auto [ec, n] = co_await bhttp::async_write(client_, sw, nothrow);
    if (ec == bhttp::error::need_buffer) ec = {};
    x.head_sent = x.head_sent || n > 0 || sw.is_header_done();
    if (ec) {
      client_failed = true;
      break;
    }
    x.bytes_out += body.size;
  } while (!sw.is_done());

  // Back to the pool only after a complete, correctly framed exchange with nothing left over.
  if (!client_failed && upstream_keep_alive && response_->is_done() && up_in_.size() == 0) {
    worker_.pool.release(ep, std::move(*upstream), ucfg.keepalive,
                         std::chrono::duration_cast<Clock::duration>(ucfg.keepalive_timeout));
  }
  up_in_.clear();
  if (client_failed) co_return false;
  // A request body the client is still sending when the origin answered would desynchronise the
  // connection: only keep it when the request was read completely.
  co_return keep && request_->is_done();
}

net::awaitable<void> Session::send_error(Exchange* x, const ProxyError& error) {
  char id_storage[37];
  std::string_view id;
  if (x != nullptr) {
    x->status = error.status;
    x->error = error.reason;
    id = x->request_id;
    if (x->head_sent) co_return;
  } else {
    id = worker_.ids.next(id_storage);
    Exchange e;
    e.start = worker_.clock.now();
    e.status = error.status;
    e.error = error.reason;
    e.request_id = id;
    log_exchange(e);
  }
  char buf[1024];
  const auto n = format_error(buf, error, id, false);
  client_.expires_after(std::chrono::seconds(5));
  co_await net::async_write(client_, net::buffer(buf, n), nothrow);
  if (x != nullptr) x->head_sent = true;
}

void Session::log_exchange(const Exchange& x) {
  if (!worker_.access_log.enabled()) return;
  AccessRecord r;
  r.client = client_ip_;
  if (request_ && request_->is_header_done()) {
    r.method = request_->get().method_string();
    r.target = request_->get().target();
  } else {
    r.method = "-";
    r.target = "-";
  }
  r.status = x.status;
  r.upstream = x.upstream ? std::string_view(x.upstream->name()) : std::string_view();
  r.server = x.server ? std::string_view(x.server->identity()) : std::string_view();
  r.attempts = x.attempts;
  r.bytes_in = x.bytes_in;
  r.bytes_out = x.bytes_out;
  r.duration = std::chrono::duration_cast<std::chrono::microseconds>(worker_.clock.now() - x.start);
  r.request_id = x.request_id;
  r.error = x.error;
  worker_.access_log.write(r);
}

}  // namespace sluice::proxy
