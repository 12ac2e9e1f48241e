#include "sluice/admin/client.hpp"

#include <algorithm>

#include <exception>
#include <optional>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

namespace sluice::admin {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);
// /api/status and /metrics grow with the number of servers; this is far above any real one.
constexpr std::uint64_t response_body_limit = 64ULL * 1024 * 1024;

using Request = http::request<http::empty_body>;
using Deadline = std::chrono::steady_clock::time_point;

struct Outcome {
  boost::system::error_code ec;
  // True when the server sent nothing back: on a kept connection that means it had closed the
  // connection while idle, and the request can be sent again on a new one.
  bool nothing_received = false;
  ClientResponse response;
};

}  // namespace

struct Client::Connection {
  net::io_context io{1};
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  void close() {
    stream.reset();
    buffer.clear();
  }

  net::awaitable<Outcome> exchange(const config::HostPort& address, const Request& req,
                                   Deadline deadline);
};

net::awaitable<Outcome> Client::Connection::exchange(const config::HostPort& address,
                                                     const Request& req, Deadline deadline) {
  Outcome out;
  if (!stream) {
    // Name resolution is not bounded by the deadline (getaddrinfo cannot be cancelled); the
    // admin address is almost always an IP literal or "localhost".
    tcp::resolver resolver(io);
    auto [resolve_ec, endpoints] =
        co_await resolver.async_resolve(address.host, std::to_string(address.port), nothrow);
    if (resolve_ec) {
      out.ec = resolve_ec;
      co_return out;
    }
    stream.emplace(io);
    stream->expires_at(deadline);
    // Every resolved address is tried in turn ("localhost" may give ::1 and 127.0.0.1).
    auto [connect_ec, endpoint] = co_await stream->async_connect(endpoints, nothrow);
    if (connect_ec) {
      out.ec = connect_ec;
      co_return out;
    }
  }
  stream->expires_at(deadline);
  auto [write_ec, written] = co_await http::async_write(*stream, req, nothrow);
  if (write_ec) {
    out.ec = write_ec;
    out.nothing_received = true;
    co_return out;
  }
  http::response_parser<http::string_body> parser;
  parser.body_limit(response_body_limit);
  auto [read_ec, read] = co_await http::async_read(*stream, buffer, parser, nothrow);
  if (read_ec) {
    out.ec = read_ec;
    out.nothing_received = !parser.got_some();
    co_return out;
  }
  auto response = parser.release();
  out.response.status = response.result_int();
  out.response.content_type = std::string(response[http::field::content_type]);
  out.response.config_source = std::string(response["Sluice-Config-Source"]);
  out.response.body = std::move(response.body());
  if (!response.keep_alive()) close();
  co_return out;
}

Client::Client(config::HostPort address, std::string token, std::chrono::milliseconds timeout)
    : address_(std::move(address)),
      token_(std::move(token)),
      timeout_(timeout),
      connection_(std::make_unique<Connection>()) {}

Client::~Client() = default;

boost::system::result<ClientResponse> Client::get(std::string_view target) {
  return request(false, target);
}

boost::system::result<ClientResponse> Client::post(std::string_view target) {
  return request(true, target);
}

boost::system::result<ClientResponse> Client::request(bool post, std::string_view target) {
  Request req{post ? http::verb::post : http::verb::get, target, 11};
  req.set(http::field::host, address_.to_string());
  req.set(http::field::user_agent, "sluice-cli/" SLUICE_VERSION);
  if (!token_.empty()) req.set(http::field::authorization, "Bearer " + token_);
  // The admin listener takes a token-less POST only when declared as JSON (docs/admin.md).
  if (post) req.set(http::field::content_type, "application/json");
  req.keep_alive(true);
  req.prepare_payload();  // POST: Content-Length: 0

  auto& c = *connection_;
  const Deadline deadline = std::chrono::steady_clock::now() + timeout_;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = c.stream.has_value();
    Outcome outcome;
    std::exception_ptr failure;
    net::co_spawn(c.io, c.exchange(address_, req, deadline), [&](std::exception_ptr e, Outcome o) {
      failure = e;
      outcome = std::move(o);
    });
    c.io.restart();
    c.io.run();
    if (failure) std::rethrow_exception(failure);  // a bug (allocation failure): not an I/O error
    if (!outcome.ec) return std::move(outcome.response);
    c.close();
    // Only a request that provably never reached a live connection is sent again.
    if (!(reused && outcome.nothing_received)) return outcome.ec;
  }
  return beast::error::timeout;  // not reached: the second attempt is on a fresh connection
}

std::optional<ServerStatus> find_server_status(std::string_view status_json,
                                               std::string_view upstream, std::string_view server,
                                               std::string* error) {
  const auto fail = [&](std::string why) -> std::optional<ServerStatus> {
    if (error != nullptr) *error = std::move(why);
    return std::nullopt;
  };
  boost::system::error_code ec;
  const boost::json::value document = boost::json::parse(status_json, ec);
  if (ec) return fail("status is not JSON: " + ec.message());
  const auto* upstreams =
      document.is_object() ? document.as_object().if_contains("upstreams") : nullptr;
  if (upstreams == nullptr || !upstreams->is_array())
    return fail("status has no \"upstreams\" array");
  for (const auto& u : upstreams->as_array()) {
    const auto* name = u.is_object() ? u.as_object().if_contains("name") : nullptr;
    if (name == nullptr || !name->is_string() || name->as_string() != upstream) continue;
    const auto* servers = u.as_object().if_contains("servers");
    if (servers == nullptr || !servers->is_array())
      return fail("upstream has no \"servers\" array");
    for (const auto& s : servers->as_array()) {
      const auto* identity = s.is_object() ? s.as_object().if_contains("identity") : nullptr;
      if (identity == nullptr || !identity->is_string() || identity->as_string() != server)
        continue;
      const auto* in_flight = s.as_object().if_contains("in_flight");
      const auto* draining = s.as_object().if_contains("draining");
      if (in_flight == nullptr || !(in_flight->is_int64() || in_flight->is_uint64()) ||
          draining == nullptr || !draining->is_bool()) {
        return fail("server entry lacks \"in_flight\" (a number) or \"draining\" (a boolean)");
      }
      ServerStatus status;
      status.found = true;
      status.in_flight = in_flight->to_number<std::uint64_t>();
      status.draining = draining->as_bool();
      // Fleet mode: the fleet's count replaces this instance's own.
      const auto* fleet = s.as_object().if_contains("fleet_in_flight");
      const auto* unconfirmed = s.as_object().if_contains("fleet_unconfirmed");
      if (fleet != nullptr && (fleet->is_int64() || fleet->is_uint64()))
        status.in_flight = fleet->to_number<std::uint64_t>();
      if (unconfirmed != nullptr && (unconfirmed->is_int64() || unconfirmed->is_uint64()))
        status.unconfirmed = unconfirmed->to_number<std::uint64_t>();
      return status;
    }
    return ServerStatus{};
  }
  return ServerStatus{};
}

namespace {

std::string text_of(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

std::uint64_t count_of(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v != nullptr && (v->is_int64() || v->is_uint64()) ? v->to_number<std::uint64_t>() : 0;
}

// "drained (api)", "ejected: 3 failures in 10s: 502", "up".
std::string server_state(const boost::json::object& server) {
  const auto* draining = server.if_contains("draining");
  const bool drained = draining != nullptr && draining->is_bool() && draining->as_bool();
  const auto health = text_of(server, "health_state");
  if (drained) {
    const auto shown = text_of(server, "state");
    const auto source = text_of(server, "drain_source");
    std::string out = shown.empty() ? "draining" : shown;
    if (!source.empty()) out += " (" + source + ")";
    if (!health.empty()) out += ", health " + health;
    return out;
  }
  if (health.empty()) return "up (no health checks)";
  const auto reason = text_of(server, "reason");
  return reason.empty() ? health : health + ": " + reason;
}

bool takes_requests(const boost::json::object& server) {
  const auto* draining = server.if_contains("draining");
  if (draining != nullptr && draining->is_bool() && draining->as_bool()) return false;
  const auto health = text_of(server, "health_state");
  return health.empty() || health == "up" || health == "slow_start";
}

}  // namespace

std::optional<std::string> status_summary(std::string_view status_json, std::string* error) {
  boost::system::error_code ec;
  const boost::json::value document = boost::json::parse(status_json, ec);
  const auto* root = !ec && document.is_object() ? &document.as_object() : nullptr;
  const auto* upstreams = root != nullptr ? root->if_contains("upstreams") : nullptr;
  if (upstreams == nullptr || !upstreams->is_array()) {
    if (error != nullptr) *error = ec ? "status is not JSON: " + ec.message() : "status has no \"upstreams\" array";
    return std::nullopt;
  }
  std::string out = "config version " + std::to_string(count_of(*root, "config_version"));
  if (const auto file = text_of(*root, "config_file"); !file.empty()) out += " (" + file + ")";
  out += "\n";
  for (const auto& u : upstreams->as_array()) {
    const auto* servers = u.is_object() ? u.as_object().if_contains("servers") : nullptr;
    if (servers == nullptr || !servers->is_array()) continue;
    std::size_t up = 0, width_id = 0, width_address = 0;
    for (const auto& sv : servers->as_array()) {
      if (!sv.is_object()) continue;
      up += takes_requests(sv.as_object()) ? 1 : 0;
      width_id = std::max(width_id, text_of(sv.as_object(), "identity").size());
      width_address = std::max(width_address, text_of(sv.as_object(), "address").size());
    }
    const auto& uo = u.as_object();
    out += "upstream " + text_of(uo, "name") + " (" + text_of(uo, "balance") + "): " + std::to_string(up) +
           "/" + std::to_string(servers->as_array().size()) + " servers up";
    if (const auto queued = count_of(uo, "queued"); queued != 0) out += ", " + std::to_string(queued) + " queued";
    out += "\n";
    for (const auto& sv : servers->as_array()) {
      if (!sv.is_object()) continue;
      const auto& so = sv.as_object();
      const auto identity = text_of(so, "identity");
      const auto address = text_of(so, "address");
      out += "  " + identity + std::string(width_id - identity.size() + 2, ' ') + address +
             std::string(width_address - address.size() + 2, ' ') + server_state(so) +
             "; in flight " + std::to_string(count_of(so, "in_flight")) + ", requests " +
             std::to_string(count_of(so, "requests")) + ", failures " +
             std::to_string(count_of(so, "failures")) + "\n";
    }
  }
  return out;
}

std::string encode_path_segment(std::string_view segment) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(segment.size());
  for (const char c : segment) {
    const auto u = static_cast<unsigned char>(c);
    const bool unreserved = (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') ||
                            (u >= '0' && u <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out += c;
    } else {
      out += '%';
      out += hex[u >> 4];
      out += hex[u & 0x0F];
    }
  }
  return out;
}

}  // namespace sluice::admin
