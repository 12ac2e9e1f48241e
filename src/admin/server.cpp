#include "sluice/admin/server.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <charconv>
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
#include <boost/url/ipv4_address.hpp>
#include <boost/url/ipv6_address.hpp>

#include "dashboard_assets.hpp"
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
// One client (by IP address) holds at most this many; a browser opens up to 6 per host.
constexpr std::size_t max_connections_per_client = 16;
// A request must be complete this long after its first byte (and a new connection must send
// one this soon): a client that connects and sends nothing is closed quickly.
constexpr auto header_timeout = std::chrono::seconds(5);
constexpr auto idle_timeout = std::chrono::seconds(60);  // between requests on a keep-alive connection
constexpr auto write_timeout = std::chrono::seconds(30);
constexpr auto accept_backoff = std::chrono::milliseconds(100);

constexpr std::string_view json_type = "application/json";
constexpr std::string_view text_type = "text/plain; charset=utf-8";
constexpr std::string_view metrics_type = "text/plain; version=0.0.4";
constexpr std::string_view toml_type = "application/toml";
constexpr std::string_view content_security_policy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

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

enum class Route {
  none, status, fleet, config, drain, undrain, reload, upgrade, metrics, healthz, readyz, asset, dashboard,
  logs_reopen
};

struct Match {
  Route route = Route::none;
  std::string upstream;  // drain/undrain
  std::string server;
  std::string binary;  // upgrade: ?binary=PATH ("" = the running binary)
  bool watch = true;   // reload: ?watch=0 applies without the watch
  const Asset* asset = nullptr;  // asset
  DashboardQuery query;          // dashboard
};

// ?tick=N&event=M: what the page already has (absent or not a number: 0, everything).
DashboardQuery dashboard_query(const boost::urls::url_view& url) {
  DashboardQuery q;
  const auto number = [&](std::string_view key) -> std::uint64_t {
    const auto it = url.params().find(key);
    if (it == url.params().end() || !(*it).has_value) return 0;
    const std::string value = (*it).value;
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    return ec == std::errc() && end == value.data() + value.size() ? n : 0;
  };
  q.after_tick = number("tick");
  q.after_event = number("event");
  return q;
}

// Segments are percent-decoded by Boost.URL, so "127.0.0.1%3A9001" names "127.0.0.1:9001" and
// an encoded '/' stays inside its segment. The query string is ignored but by /api/dashboard,
// /api/upgrade and /api/reload.
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
  else if (is({"api", "fleet"}))
    m.route = Route::fleet;
  else if (is({"api", "config"}))
    m.route = Route::config;
  else if (is({"api", "reload"})) {
    m.route = Route::reload;
    if (auto it = url->params().find("watch"); it != url->params().end()) m.watch = (*it).value != "0";
  }
  else if (is({"api", "logs", "reopen"}))
    m.route = Route::logs_reopen;
  else if (is({"api", "upgrade"})) {
    m.route = Route::upgrade;
    if (auto it = url->params().find("binary"); it != url->params().end()) m.binary = (*it).value;
  } else if (is({"metrics"}))
    m.route = Route::metrics;
  else if (is({"healthz"}))
    m.route = Route::healthz;
  else if (is({"readyz"}))
    m.route = Route::readyz;
  else if (is({"api", "dashboard"})) {
    m.route = Route::dashboard;
    m.query = dashboard_query(*url);
  } else if (segments.size() <= 1 &&
             (m.asset = dashboard_asset(segments.empty() ? "" : segments[0])) != nullptr) {
    m.route = Route::asset;  // "/", "/dashboard" and the page's script and style sheet
  }
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
         route == Route::upgrade || route == Route::logs_reopen;
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

std::string lower(std::string_view text) {
  std::string out(text);
  std::ranges::transform(out, out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool iequals(std::string_view a, std::string_view b) { return lower(a) == lower(b); }

// The host of a Host field value or an Origin's authority, lowercased: RFC 9110 §7.2 uri-host
// [":" port]; an IPv6 literal keeps its brackets ("[::1]:9901" -> "[::1]").
std::string host_of(std::string_view authority) {
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    return close == std::string_view::npos ? std::string() : lower(authority.substr(0, close + 1));
  }
  return lower(authority.substr(0, authority.find(':')));
}

// An IP literal cannot be rebound: a DNS-rebinding page runs under a name it controls, and the
// browser sends that name as Host. IP literals (a Kubernetes probe or Prometheus target by pod
// IP) are therefore safe to accept.
bool is_ip_literal(std::string_view host) {
  if (host.starts_with('[') && host.ends_with(']')) {
    return boost::urls::parse_ipv6_address(host.substr(1, host.size() - 2)).has_value();
  }
  return boost::urls::parse_ipv4_address(host).has_value();
}

// What refuses a state-changing request from a browser page of another origin (CSRF): the
// browser's own word in Sec-Fetch-Site (Fetch Metadata) or an Origin (RFC 6454 §7) naming
// another authority than the Host the request was sent to. "" = not cross-site. Non-browser
// clients (the CLI, curl) send neither field.
std::string cross_site_reason(const Request& req) {
  if (const auto it = req.find("Sec-Fetch-Site"); it != req.end()) {
    const auto site = lower(it->value());
    if (site != "same-origin" && site != "none") return "Sec-Fetch-Site: " + site;
  }
  if (const auto it = req.find(http::field::origin); it != req.end()) {
    const std::string_view origin = it->value();
    const auto scheme_end = origin.find("://");
    const std::string_view authority =
        scheme_end == std::string_view::npos ? std::string_view() : origin.substr(scheme_end + 3);
    if (authority.empty() || !iequals(authority, req[http::field::host])) {
      return "Origin " + std::string(origin) + " is not this listener";
    }
  }
  return {};
}

// A form or a text/plain fetch() is a "simple" request a page of any origin may send without
// asking (Fetch, CORS-safelisted request-header); application/json needs a preflight, which this
// listener never grants.
bool is_json(const Request& req) {
  std::string_view type = req[http::field::content_type];
  type = type.substr(0, type.find(';'));
  while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
  return iequals(type, json_type);
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

  // One open connection. `reading`: waiting for (or reading) a request, so it may be closed to
  // make room for a new connection; false while a response is being written.
  struct Connection {
    std::shared_ptr<beast::tcp_stream> stream;
    std::string client;  // the peer's IP address
    bool reading = true;
  };

  static net::awaitable<void> accept_loop(std::shared_ptr<State> s);
  static net::awaitable<void> serve(std::shared_ptr<State> s, std::uint64_t id,
                                    std::shared_ptr<beast::tcp_stream> stream);
  bool make_room(const std::string& client);
  bool evict_oldest_idle(const std::string* client);
  Connection* find(std::uint64_t id);
  std::optional<Reply> refuse_host(const Request& req) const;
  std::optional<Reply> refuse_change(const Request& req, const std::string& peer) const;
  Reply dispatch(const Request& req, const std::string& peer);
  Reply call(const Match& m, const std::string& peer);
  Response respond(const Request& req, Reply r) const;

  net::io_context& io;
  const config::HostPort listen;
  Control& control;
  std::string token;
  std::vector<std::string> allowed_hosts;  // lowercase
  tcp::acceptor acceptor;
  std::map<std::uint64_t, Connection> connections;  // by id: oldest first
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

std::string address_of(const tcp::socket& socket) {
  boost::system::error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  return ec ? std::string("?") : ep.address().to_string();
}

}  // namespace

// The listener must keep answering /healthz whatever other clients hold open: a new connection
// never waits and is refused only when every open one is busy answering. Beyond the per-client
// or the global cap, the oldest connection that is waiting for a request makes way.
bool Server::State::make_room(const std::string& client) {
  const auto mine = std::ranges::count_if(
      connections, [&](const auto& entry) { return entry.second.client == client; });
  if (static_cast<std::size_t>(mine) >= max_connections_per_client) return evict_oldest_idle(&client);
  if (connections.size() >= max_connections) return evict_oldest_idle(nullptr);
  return true;
}

bool Server::State::evict_oldest_idle(const std::string* client) {
  for (auto it = connections.begin(); it != connections.end(); ++it) {
    if (!it->second.reading || (client != nullptr && it->second.client != *client)) continue;
    spdlog::debug("admin: closing an idle connection from {} to make room", it->second.client);
    boost::system::error_code ignored;
    it->second.stream->socket().close(ignored);  // its coroutine wakes with operation_aborted
    connections.erase(it);
    return true;
  }
  return false;
}

Server::State::Connection* Server::State::find(std::uint64_t id) {
  const auto it = connections.find(id);
  return it == connections.end() ? nullptr : &it->second;
}

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
    std::string client = address_of(socket);
    if (!s->make_room(client)) {
      spdlog::warn("admin: {} connections busy; closing a new one from {}",
                   s->connections.size(), client);
      continue;  // the socket closes as it goes out of scope
    }
    const std::uint64_t id = s->next_id++;
    auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
    s->connections.emplace(id, Connection{stream, std::move(client)});
    net::co_spawn(s->io, serve(s, id, stream),
                  [](std::exception_ptr e) { log_failure("connection", e); });
  }
}

namespace {

// Reads one request. The first on a connection must be complete within header_timeout of the
// accept; a later one may wait idle_timeout for its first byte, then has header_timeout.
net::awaitable<boost::system::error_code> read_request(beast::tcp_stream& stream,
                                                       beast::flat_buffer& buffer,
                                                       http::request_parser<http::string_body>& parser,
                                                       bool first) {
  if (!first && buffer.size() == 0) {
    stream.expires_after(idle_timeout);
    auto [ec, n] = co_await stream.async_read_some(buffer.prepare(header_limit), nothrow);
    if (ec) co_return ec;
    buffer.commit(n);
  }
  stream.expires_after(header_timeout);
  auto [ec, n] = co_await http::async_read(stream, buffer, parser, nothrow);
  co_return ec;
}

bool expected_end(const boost::system::error_code& ec) {
  // The client closed the connection, went idle, or reset it; or stop() / an eviction closed it.
  return ec == http::error::end_of_stream || ec == beast::error::timeout ||
         ec == net::error::operation_aborted || ec == net::error::connection_reset ||
         ec == net::error::eof || ec == net::error::bad_descriptor;
}

}  // namespace

// One connection: read a request, answer it, repeat while both sides keep the connection alive.
net::awaitable<void> Server::State::serve(std::shared_ptr<State> s, std::uint64_t id,
                                          std::shared_ptr<beast::tcp_stream> stream) {
  const std::string peer = remote_of(*stream);
  beast::flat_buffer buffer;
  for (bool first = true;; first = false) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(header_limit);
    parser.body_limit(body_limit);
    const auto read_ec = co_await read_request(*stream, buffer, parser, first);
    // stop() may have raced a completed read: no Control call after it. Evicted: closed already.
    Connection* conn = s->find(id);
    if (s->stopped || conn == nullptr) co_return;
    Response response;
    if (read_ec) {
      if (expected_end(read_ec)) break;
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
    conn->reading = false;
    stream->expires_after(write_timeout);
    auto [write_ec, write_n] = co_await http::async_write(*stream, response, nothrow);
    conn = s->find(id);
    if (conn == nullptr) co_return;
    conn->reading = true;
    if (write_ec || s->stopped || !response.keep_alive()) break;
  }
  boost::system::error_code ignored;
  stream->socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream->close();
  s->connections.erase(id);
}

// RFC 9112 §3.2: an HTTP/1.1 request without Host is 400. A Host that is not this listener's
// (its listen host, localhost, an IP literal or [admin] allowed_hosts) is what a DNS-rebinding
// page sends: 421 (RFC 9110 §15.5.20, not configured for that authority), nothing is called.
std::optional<Reply> Server::State::refuse_host(const Request& req) const {
  const auto it = req.find(http::field::host);
  if (it == req.end()) {
    if (req.version() < 11) return std::nullopt;
    return error_reply(http::status::bad_request, "missing Host header (RFC 9112 section 3.2)");
  }
  const std::string host = host_of(it->value());
  if (host == "localhost" || host == lower(listen.host) || is_ip_literal(host) ||
      std::ranges::find(allowed_hosts, host) != allowed_hosts.end()) {
    return std::nullopt;
  }
  spdlog::warn("admin: {} {}: Host '{}' is not allowed", req.method_string(), req.target(),
               it->value());
  return error_reply(http::status::misdirected_request,
                     "Host '" + std::string(it->value()) +
                         "' is not allowed; add it to [admin] allowed_hosts");
}

// Every POST changes something. A page of another site is refused by what the browser says
// (403); the token, when configured, guards all of them (401); without a token, the body must
// be declared application/json (415), which no cross-site form or simple fetch() can send.
std::optional<Reply> Server::State::refuse_change(const Request& req,
                                                  const std::string& peer) const {
  if (const auto why = cross_site_reason(req); !why.empty()) {
    spdlog::warn("admin: {} {} from {}: cross-site request refused ({})", req.method_string(),
                 req.target(), peer, why);
    return error_reply(http::status::forbidden, "cross-site request refused: " + why);
  }
  if (!token.empty()) {
    if (authorized(req, token)) return std::nullopt;
    spdlog::warn("admin: {} {} from {}: missing or wrong bearer token", req.method_string(),
                 req.target(), peer);
    Reply r = error_reply(http::status::unauthorized, "missing or wrong bearer token");
    r.challenge = true;
    return r;
  }
  if (is_json(req)) return std::nullopt;
  return error_reply(http::status::unsupported_media_type,
                     "a POST to the admin API needs Content-Type: application/json");
}

Reply Server::State::dispatch(const Request& req, const std::string& peer) {
  if (auto refused = refuse_host(req)) return std::move(*refused);
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
  if (post)
    if (auto refused = refuse_change(req, peer)) return std::move(*refused);
  // Control throwing is a bug or a failed reload step in the runtime: the listener goes on.
  try {
    return call(*m, peer);
  } catch (const std::exception& e) {
    spdlog::error("admin: {} {}: {}", req.method_string(), req.target(), e.what());
    return error_reply(http::status::internal_server_error, e.what());
  }
}

namespace {

json::array to_array(const std::vector<std::string>& lines) {
  json::array out;
  for (const auto& line : lines) out.emplace_back(line);
  return out;
}

// POST /api/reload: 200 with the version now serving (and how long it is watched), else 422 with
// every error in the file.
Reply reload_reply(Control& control, const Match& m, const std::string& peer) {
  spdlog::info("admin: reload{} requested by {}", m.watch ? "" : " without watch", peer);
  const ReloadOutcome outcome = m.watch ? control.reload() : control.reload_unwatched();
  if (outcome.ok) {
    return json_reply(http::status::ok,
                      {{"ok", true}, {"version", outcome.version}, {"watch_ms", outcome.watch_ms}});
  }
  return json_reply(http::status::unprocessable_entity,
                    {{"ok", false}, {"errors", to_array(outcome.errors)}});
}

Reply upgrade_reply(Control& control, const Match& m, const std::string& peer) {
  spdlog::info("admin: upgrade to {} requested by {}", m.binary.empty() ? "the same binary" : m.binary, peer);
  const UpgradeOutcome outcome = control.upgrade(m.binary);
  if (outcome.ok) return json_reply(http::status::ok, {{"ok", true}, {"pid", outcome.pid}});
  return json_reply(http::status::internal_server_error, {{"ok", false}, {"error", outcome.error}});
}

Reply logs_reopen_reply(Control& control, const std::string& peer) {
  spdlog::info("admin: log reopen requested by {}", peer);
  const auto failed = control.reopen_logs();
  if (failed.empty()) return json_reply(http::status::ok, {{"ok", true}});
  return json_reply(http::status::internal_server_error, {{"ok", false}, {"errors", to_array(failed)}});
}

// POST .../drain or .../undrain: 404 names what is missing, the upstream or its server.
Reply drain_reply(Control& control, const Match& m, const std::string& peer) {
  const bool drain = m.route == Route::drain;
  spdlog::info("admin: {} {}/{} requested by {}", drain ? "drain" : "undrain", m.upstream, m.server, peer);
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
  return error_reply(http::status::internal_server_error, "unhandled admin route");
}

}  // namespace

Reply Server::State::call(const Match& m, const std::string& peer) {
  switch (m.route) {
    case Route::status:
      return reply(http::status::ok, json_type, control.status_json());
    case Route::fleet: {
      auto fleet = control.fleet_json();
      if (fleet.empty()) return error_reply(http::status::not_found, "fleet mode is off: no [fleet] section");
      return reply(http::status::ok, json_type, std::move(fleet));
    }
    case Route::dashboard:
      return reply(http::status::ok, json_type, control.dashboard_json(m.query));
    case Route::asset:
      return reply(http::status::ok, m.asset->content_type, std::string(m.asset->body));
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
    case Route::reload:
      return reload_reply(control, m, peer);
    case Route::upgrade:
      return upgrade_reply(control, m, peer);
    case Route::logs_reopen:
      return logs_reopen_reply(control, peer);
    case Route::drain:
    case Route::undrain:
      return drain_reply(control, m, peer);
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
  // The dashboard runs its own script only, talks to this listener only and cannot be framed
  // (clickjacking the drain buttons); the same header on the JSON answers costs nothing.
  res.set("Content-Security-Policy", content_security_policy);
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
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
    // A system_error's what() carries Boost's source location; the operator wants the reason.
    const auto* system = dynamic_cast<const boost::system::system_error*>(&e);
    std::string reason = system != nullptr ? system->code().message() : std::string(e.what());
    if (system != nullptr && !reason.empty())  // "address already in use": it follows a colon
      reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
    throw std::runtime_error("cannot listen on admin address " + s.listen.to_string() + ": " + reason);
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
  for (auto& [id, conn] : s.connections) conn.stream->socket().close(ignored);
  s.connections.clear();
}

void Server::stop_accepting() {
  boost::system::error_code ignored;
  state_->acceptor.close(ignored);
}

void Server::set_token(std::string token) { state_->token = std::move(token); }

void Server::set_allowed_hosts(std::vector<std::string> hosts) {
  for (auto& h : hosts) h = lower(h);
  state_->allowed_hosts = std::move(hosts);
}

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
