#include "sluice/admin/server.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse.hpp>

#include "sluice/core/file.hpp"
#include "sluice/upstream/upstream.hpp"

namespace sluice::admin {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);

// Limits of a control-plane listener: nothing the admin API accepts has a body worth more than
// a few bytes, and a handful of operators and one Prometheus are its clients.
constexpr std::uint32_t header_limit = 8 * 1024;
constexpr std::uint64_t body_limit = 64 * 1024;
constexpr std::size_t max_connections = 64;
constexpr auto idle_timeout = std::chrono::seconds(60);
constexpr auto write_timeout = std::chrono::seconds(30);
constexpr auto accept_backoff = std::chrono::milliseconds(100);

constexpr std::string_view json_type = "application/json";
constexpr std::string_view text_type = "text/plain; charset=utf-8";
constexpr std::string_view metrics_type = "text/plain; version=0.0.4";
constexpr std::string_view toml_type = "application/toml";

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// What a route answers, before it becomes an HTTP message.
struct Reply {
  http::status status = http::status::ok;
  std::string_view content_type = json_type;
  std::string body;
  std::string_view allow;  // set on 405
  bool challenge = false;  // 401: add WWW-Authenticate
  std::string config_source;  // GET /api/config: Sluice-Config-Source
};

Reply reply(http::status status, std::string_view content_type, std::string body) {
  Reply r;
  r.status = status;
  r.content_type = content_type;
  r.body = std::move(body);
  return r;
}

Reply json_reply(http::status status, const json::object& body) {
  return reply(status, json_type, json::serialize(body));
}

Reply error_reply(http::status status, std::string message) {
  return json_reply(status, {{"error", std::move(message)}});
}

enum class Route { none, status, config, drain, undrain, reload, upgrade, metrics, healthz, readyz };

struct Match {
  Route route = Route::none;
  std::string upstream;  // drain/undrain
  std::string server;
  std::string binary;  // upgrade: ?binary=PATH ("" = the running binary)
};

// Segments are percent-decoded by Boost.URL, so "127.0.0.1%3A9001" names "127.0.0.1:9001" and
// an encoded '/' stays inside its segment. The query string is ignored.
std::optional<Match> match_route(std::string_view target) {
  const auto url = boost::urls::parse_origin_form(target);
  if (!url) return std::nullopt;
  std::vector<std::string> segments;
  for (auto&& segment : url->segments()) segments.emplace_back(segment);
  const auto is = [&](std::initializer_list<std::string_view> want) {
    return std::equal(segments.begin(), segments.end(), want.begin(), want.end());
  };
  Match m;
  if (is({"api", "status"}))
    m.route = Route::status;
  else if (is({"api", "config"}))
    m.route = Route::config;
  else if (is({"api", "reload"}))
    m.route = Route::reload;
  else if (is({"api", "upgrade"})) {
    m.route = Route::upgrade;
    if (auto it = url->params().find("binary"); it != url->params().end()) m.binary = (*it).value;
  }
  else if (is({"metrics"}))
    m.route = Route::metrics;
  else if (is({"healthz"}))
    m.route = Route::healthz;
  else if (is({"readyz"}))
    m.route = Route::readyz;
  else if (segments.size() == 6 && segments[0] == "api" && segments[1] == "upstreams" &&
           segments[3] == "servers" && (segments[5] == "drain" || segments[5] == "undrain") &&
           !segments[2].empty() && !segments[4].empty()) {
    m.route = segments[5] == "drain" ? Route::drain : Route::undrain;
    m.upstream = std::move(segments[2]);
    m.server = std::move(segments[4]);
  }
  return m;
}

bool is_post_route(Route route) {
  return route == Route::drain || route == Route::undrain || route == Route::reload ||
         route == Route::upgrade;
}

// RFC 9110 §11.6.2 / RFC 6750 §2.1: `Authorization: Bearer <token>`; the scheme is
// case-insensitive (§11.1), the token is compared exactly.
bool authorized(const Request& req, std::string_view token) {
  const auto it = req.find(http::field::authorization);
  if (it == req.end()) return false;
  std::string_view value = it->value();
  constexpr std::string_view scheme = "bearer";
  if (value.size() <= scheme.size() || value[scheme.size()] != ' ') return false;
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(value[i])) != scheme[i]) return false;
  }
  value.remove_prefix(scheme.size());
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  return secret_equals(value, token);
}

std::string remote_of(const beast::tcp_stream& stream) {
  boost::system::error_code ec;
  const auto ep = stream.socket().remote_endpoint(ec);
  if (ec) return "?";
  const auto address = ep.address().to_string();
  return (ep.address().is_v6() ? "[" + address + "]" : address) + ":" + std::to_string(ep.port());
}

}  // namespace

struct Server::State {
  State(net::io_context& io, config::HostPort listen, Control& control, std::string token)
      : io(io),
        listen(std::move(listen)),
        control(control),
        token(std::move(token)),
        acceptor(io) {}

  static net::awaitable<void> accept_loop(std::shared_ptr<State> s);
  static net::awaitable<void> serve(std::shared_ptr<State> s, std::uint64_t id,
                                    std::shared_ptr<beast::tcp_stream> stream);
  Reply dispatch(const Request& req, const std::string& peer);
  Reply call(const Match& m, const std::string& peer);
  Response respond(const Request& req, Reply r) const;

  net::io_context& io;
  const config::HostPort listen;
  Control& control;
  std::string token;
  tcp::acceptor acceptor;
  std::map<std::uint64_t, std::shared_ptr<beast::tcp_stream>> connections;
  std::uint64_t next_id = 0;
  std::uint16_t port = 0;
  bool started = false;
  bool stopped = false;
};

namespace {

void log_failure(std::string_view what, std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    spdlog::error("admin: {} failed: {}", what, x.what());
  }
}

}  // namespace

net::awaitable<void> Server::State::accept_loop(std::shared_ptr<State> s) {
  net::steady_timer backoff(s->io);
  while (!s->stopped) {
    auto [ec, socket] = co_await s->acceptor.async_accept(nothrow);
    if (s->stopped || ec == net::error::operation_aborted) break;
    if (ec) {
      // EMFILE and friends: retrying at once would spin; the listener must not die either.
      spdlog::warn("admin: accept failed: {}", ec.message());
      backoff.expires_after(accept_backoff);
      co_await backoff.async_wait(nothrow);
      continue;
    }
    if (s->connections.size() >= max_connections) {
      spdlog::warn("admin: {} connections open; closing a new one", max_connections);
      continue;  // the socket closes as it goes out of scope
    }
    const std::uint64_t id = s->next_id++;
    auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
    s->connections.emplace(id, stream);
    net::co_spawn(s->io, serve(s, id, stream),
                  [](std::exception_ptr e) { log_failure("connection", e); });
  }
}

// One connection: read a request, answer it, repeat while both sides keep the connection alive.
net::awaitable<void> Server::State::serve(std::shared_ptr<State> s, std::uint64_t id,
                                          std::shared_ptr<beast::tcp_stream> stream) {
  const std::string peer = remote_of(*stream);
  beast::flat_buffer buffer;
  while (true) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(header_limit);
    parser.body_limit(body_limit);
    stream->expires_after(idle_timeout);
    auto [read_ec, read_n] = co_await http::async_read(*stream, buffer, parser, nothrow);
    if (s->stopped) break;  // stop() may have raced a completed read: no Control call after it
    Response response;
    if (read_ec) {
      // Expected ends of a connection: the client closed it, went idle, or reset it.
      if (read_ec == http::error::end_of_stream || read_ec == beast::error::timeout ||
          read_ec == net::error::operation_aborted || read_ec == net::error::connection_reset ||
          read_ec == net::error::eof) {
        break;
      }
      Request empty;
      empty.version(11);
      empty.keep_alive(false);
      const auto status = read_ec == http::error::body_limit ? http::status::payload_too_large
                          : read_ec == http::error::header_limit
                              ? http::status::request_header_fields_too_large
                              : http::status::bad_request;
      response = s->respond(empty, error_reply(status, "bad request: " + read_ec.message()));
    } else {
      const Request& req = parser.get();
      response = s->respond(req, s->dispatch(req, peer));
    }
    stream->expires_after(write_timeout);
    auto [write_ec, write_n] = co_await http::async_write(*stream, response, nothrow);
    if (write_ec || s->stopped || !response.keep_alive()) break;
  }
  boost::system::error_code ignored;
  stream->socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream->close();
  s->connections.erase(id);
}

Reply Server::State::dispatch(const Request& req, const std::string& peer) {
  const auto m = match_route(req.target());
  if (!m) return error_reply(http::status::bad_request, "malformed request target");
  if (m->route == Route::none) {
    return error_reply(http::status::not_found,
                       "no admin endpoint at '" + std::string(req.target()) + "'");
  }
  const bool post = is_post_route(m->route);
  const bool method_ok = post ? req.method() == http::verb::post
                              : req.method() == http::verb::get || req.method() == http::verb::head;
  if (!method_ok) {
    Reply r = error_reply(http::status::method_not_allowed,
                          "method " + std::string(req.method_string()) + " not allowed; use " +
                              (post ? "POST" : "GET"));
    r.allow = post ? "POST" : "GET, HEAD";
    return r;
  }
  // Every POST changes something; the token guards all of them, and Control is not called.
  if (post && !token.empty() && !authorized(req, token)) {
    spdlog::warn("admin: {} {} from {}: missing or wrong bearer token", req.method_string(),
                 req.target(), peer);
    Reply r = error_reply(http::status::unauthorized, "missing or wrong bearer token");
    r.challenge = true;
    return r;
  }
  // Control throwing is a bug or a failed reload step in the runtime: the listener goes on.
  try {
    return call(*m, peer);
  } catch (const std::exception& e) {
    spdlog::error("admin: {} {}: {}", req.method_string(), req.target(), e.what());
    return error_reply(http::status::internal_server_error, e.what());
  }
}

Reply Server::State::call(const Match& m, const std::string& peer) {
  switch (m.route) {
    case Route::status:
      return reply(http::status::ok, json_type, control.status_json());
    case Route::metrics:
      return reply(http::status::ok, metrics_type, control.metrics_text());
    case Route::config: {
      // The TOML as the process parsed it; the file it came from in a header, since the file on
      // disk may have changed since (that difference is what `check --diff-running` shows).
      Reply r = reply(http::status::ok, toml_type, control.config_text());
      r.config_source = control.config_source();
      return r;
    }
    case Route::healthz:
      return reply(http::status::ok, text_type, "ok");
    case Route::readyz:
      return control.ready() ? reply(http::status::ok, text_type, "ready")
                             : reply(http::status::service_unavailable, text_type, "not ready");
    case Route::reload: {
      spdlog::info("admin: reload requested by {}", peer);
      const ReloadOutcome outcome = control.reload();
      if (outcome.ok) {
        return json_reply(http::status::ok, {{"ok", true}, {"version", outcome.version}});
      }
      json::array errors;
      for (const auto& e : outcome.errors) errors.emplace_back(e);
      return json_reply(http::status::unprocessable_entity,
                        {{"ok", false}, {"errors", std::move(errors)}});
    }
    case Route::upgrade: {
      spdlog::info("admin: upgrade to {} requested by {}", m.binary.empty() ? "the same binary" : m.binary, peer);
      const UpgradeOutcome outcome = control.upgrade(m.binary);
      if (outcome.ok) return json_reply(http::status::ok, {{"ok", true}, {"pid", outcome.pid}});
      return json_reply(http::status::internal_server_error, {{"ok", false}, {"error", outcome.error}});
    }
    case Route::drain:
    case Route::undrain: {
      const bool drain = m.route == Route::drain;
      spdlog::info("admin: {} {}/{} requested by {}", drain ? "drain" : "undrain", m.upstream,
                   m.server, peer);
      switch (control.set_drain(m.upstream, m.server, drain)) {
        case DrainOutcome::done:
          return json_reply(http::status::ok,
                            {{"upstream", m.upstream}, {"server", m.server}, {"draining", drain}});
        case DrainOutcome::no_such_upstream:
          return error_reply(http::status::not_found, "no upstream '" + m.upstream + "'");
        case DrainOutcome::no_such_server:
          return error_reply(http::status::not_found,
                             "no server '" + m.server + "' in upstream '" + m.upstream + "'");
      }
      break;
    }
    case Route::none:
      break;
  }
  return error_reply(http::status::internal_server_error, "unhandled admin route");
}

Response Server::State::respond(const Request& req, Reply r) const {
  Response res{r.status, req.version()};
  res.set(http::field::server, "sluice-admin");
  res.set(http::field::content_type, r.content_type);
  // Status, metrics and probe answers are live values: no cache may keep them.
  res.set(http::field::cache_control, "no-store");
  if (!r.allow.empty()) res.set(http::field::allow, r.allow);
  if (r.challenge) res.set(http::field::www_authenticate, "Bearer realm=\"sluice-admin\"");
  // A file name with control characters (possible, if perverse) is left out of the header.
  if (!r.config_source.empty() &&
      std::ranges::none_of(r.config_source, [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
    res.set("Sluice-Config-Source", r.config_source);
  res.keep_alive(req.keep_alive());
  res.body() = std::move(r.body);
  res.prepare_payload();
  // RFC 9110 §9.3.2: HEAD gets GET's header fields (Content-Length included) and no content.
  if (req.method() == http::verb::head) res.body().clear();
  return res;
}

Server::Server(net::io_context& control, const config::HostPort& listen, Control& control_api,
               std::string token)
    : state_(std::make_shared<State>(control, listen, control_api, std::move(token))) {}

Server::~Server() { stop(); }

void Server::start(int inherited_fd) {
  auto& s = *state_;
  if (s.started) throw std::logic_error("admin::Server::start called twice");
  s.started = true;
  try {
    const tcp::endpoint endpoint = resolve_host_port(s.listen);
    if (inherited_fd >= 0) {
      s.acceptor.assign(endpoint.protocol(), inherited_fd);
      s.port = s.acceptor.local_endpoint().port();
      net::co_spawn(s.io, State::accept_loop(state_),
                    [](std::exception_ptr e) { log_failure("listener", e); });
      return;
    }
    s.acceptor.open(endpoint.protocol());
    s.acceptor.set_option(tcp::acceptor::reuse_address(true));
    if (endpoint.address().is_v6()) s.acceptor.set_option(net::ip::v6_only(true));
    s.acceptor.bind(endpoint);
    s.acceptor.listen();
    s.port = s.acceptor.local_endpoint().port();
  } catch (const std::exception& e) {
    boost::system::error_code ignored;
    s.acceptor.close(ignored);
    throw std::runtime_error("cannot listen on admin address " + s.listen.to_string() + ": " +
                             e.what());
  }
  net::co_spawn(s.io, State::accept_loop(state_),
                [](std::exception_ptr e) { log_failure("listener", e); });
}

void Server::stop() {
  auto& s = *state_;
  if (s.stopped) return;
  s.stopped = true;
  boost::system::error_code ignored;
  s.acceptor.close(ignored);
  // Each connection's coroutine wakes with operation_aborted, sees `stopped` and ends.
  for (auto& [id, stream] : s.connections) stream->socket().close(ignored);
  s.connections.clear();
}

void Server::stop_accepting() {
  boost::system::error_code ignored;
  state_->acceptor.close(ignored);
}

void Server::set_token(std::string token) { state_->token = std::move(token); }

std::uint16_t Server::local_port() const { return state_->port; }

int Server::listener_fd() { return state_->acceptor.native_handle(); }

std::string read_token_file(const std::string& path) {
  std::string text;
  if (const int error = read_whole_file(path, text); error != 0) {
    throw std::runtime_error("cannot read admin token file '" + path +
                             "': " + std::strerror(error));
  }
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  const auto first = std::find_if_not(text.begin(), text.end(), space);
  const auto last = std::find_if_not(text.rbegin(), text.rend(), space).base();
  if (first >= last) throw std::runtime_error("admin token file '" + path + "' is empty");
  std::string token(first, last);
  // The token travels in an HTTP header field (RFC 9110 §5.5: no CTLs in field values).
  const bool controls = std::any_of(token.begin(), token.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
  if (controls) {
    throw std::runtime_error("admin token file '" + path +
                             "' contains control characters (the token must be one line)");
  }
  return token;
}

bool secret_equals(std::string_view presented, std::string_view expected) {
  // Every byte of `expected` is visited and differences are OR-ed, never returned early.
  unsigned difference = presented.size() == expected.size() ? 0U : 1U;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const char p = i < presented.size() ? presented[i] : '\0';
    difference |= static_cast<unsigned char>(p ^ expected[i]);
  }
  return difference == 0;
}

}  // namespace sluice::admin
