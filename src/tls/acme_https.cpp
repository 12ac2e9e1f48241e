#include "acme_https.hpp"

#include <chrono>
#include <stdexcept>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/url/parse.hpp>

namespace sluice::tls::acme {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

// Each step of a request (resolve, connect, handshake, write, read) within this.
constexpr std::chrono::seconds step_timeout{30};
// A CA's answers are small JSON documents and certificate chains.
constexpr std::size_t body_limit = 1 << 20;

struct Target {
  std::string host;
  std::string port;
  std::string path;
};

Target parse(const std::string& url) {
  auto u = boost::urls::parse_uri(url);
  if (!u || u->scheme() != "https") throw std::runtime_error("not an https URL: '" + url + "'");
  Target t{std::string(u->host_address()), u->has_port() ? std::string(u->port()) : "443",
           std::string(u->encoded_path())};
  if (t.path.empty()) t.path = "/";
  if (u->has_query()) t.path += "?" + std::string(u->encoded_query());
  return t;
}

net::awaitable<Reply> run(net::ssl::context& context, Target target, http::request<http::string_body> request) {
  auto executor = co_await net::this_coro::executor;
  beast::ssl_stream<beast::tcp_stream> stream(executor, context);
  auto& tcp_layer = beast::get_lowest_layer(stream);
  tcp::resolver resolver(executor);
  tcp_layer.expires_after(step_timeout);
  const auto addresses = co_await resolver.async_resolve(target.host, target.port, net::use_awaitable);
  co_await tcp_layer.async_connect(addresses, net::use_awaitable);
  SSL_set_tlsext_host_name(stream.native_handle(), target.host.c_str());
  stream.set_verify_mode(net::ssl::verify_peer);
  stream.set_verify_callback(net::ssl::host_name_verification(target.host));
  tcp_layer.expires_after(step_timeout);
  co_await stream.async_handshake(net::ssl::stream_base::client, net::use_awaitable);
  tcp_layer.expires_after(step_timeout);
  co_await http::async_write(stream, request, net::use_awaitable);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(body_limit);
  if (request.method() == http::verb::head) parser.skip(true);
  tcp_layer.expires_after(step_timeout);
  co_await http::async_read(stream, buffer, parser, net::use_awaitable);
  const auto& response = parser.get();
  Reply reply;
  reply.status = response.result_int();
  reply.body = response.body();
  reply.location = std::string(response[http::field::location]);
  reply.nonce = std::string(response["Replay-Nonce"]);
  reply.retry_after = std::string(response[http::field::retry_after]);
  co_return reply;
}

}  // namespace

Https::Https(const std::string& ca_file, std::function<bool()> running)
    : context_(net::ssl::context::tls_client), running_(std::move(running)) {
  boost::system::error_code ec;
  if (ca_file.empty()) context_.set_default_verify_paths(ec);
  else context_.load_verify_file(ca_file, ec);
  if (ec) throw std::runtime_error("cannot load the CAs '" + ca_file + "': " + ec.message());
}

Reply Https::get(const std::string& url, bool head) {
  return exchange(url, static_cast<int>(head ? http::verb::head : http::verb::get), {}, {});
}

Reply Https::post(const std::string& url, const std::string& body, std::string_view content_type) {
  return exchange(url, static_cast<int>(http::verb::post), body, content_type);
}

Reply Https::exchange(const std::string& url, int verb, const std::string& body, std::string_view content_type) {
  Target target = parse(url);
  http::request<http::string_body> request(static_cast<http::verb>(verb), target.path, 11);
  // The CA builds its resource URLs from Host (RFC 9110 §7.2: with the port when not the default).
  request.set(http::field::host, target.port == "443" ? target.host : target.host + ":" + target.port);
  request.set(http::field::user_agent, "sluice-acme");
  if (!content_type.empty()) request.set(http::field::content_type, content_type);
  request.body() = body;
  request.prepare_payload();
  auto future = net::co_spawn(io_, run(context_, std::move(target), std::move(request)), net::use_future);
  io_.restart();
  while (!io_.stopped()) {
    io_.run_for(std::chrono::milliseconds(100));
    if (!io_.stopped() && !running_()) throw std::runtime_error("stopped");
  }
  try {
    return future.get();
  } catch (const boost::system::system_error& e) {
    throw std::runtime_error(url + ": " + e.code().message());
  }
}

}  // namespace sluice::tls::acme
