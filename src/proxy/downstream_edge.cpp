// The edge steps of a session (docs/edge.md), kept apart from downstream_session.cpp: the PROXY protocol
// header of a proxy_protocol listener, the client address of a request, and a route's admission.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "sluice/http/head.hpp"
#include "sluice/proxy/proxy_protocol.hpp"
#include "sluice/proxy/downstream_session.hpp"

namespace sluice::proxy {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

namespace {
constexpr auto nothrow = net::as_tuple(net::use_awaitable);

void bump(std::atomic<std::uint64_t>& counter) { EndpointCounters::bump(counter); }  // this worker's
}  // namespace

// Before anything else on a proxy_protocol listener (before TLS): only a trusted peer may send
// the header, and it must be complete and valid within header_timeout. The socket is peeked and
// then read exactly up to the header's end, so that every byte after it stays in the socket for
// the TLS handshake or the HTTP parser. False: the connection is to be closed (counted).
net::awaitable<bool> DownstreamSession::read_proxy_header() {
  const auto& server = worker_.snapshot->config->server;
  auto& rejected = proxy_protocol_rejections(worker_.index);
  if (!contains(server.trusted_proxies, client_addr_)) {
    bump(rejected.untrusted);
    spdlog::debug("client {}: refused: not in trusted_proxies (PROXY protocol listener)", client_ip_);
    co_return false;
  }
  idle_ = true;  // as for a TLS handshake: graceful shutdown closes a connection still sending it
  expire_from_now(server.header_timeout);
  ProxyHeaderParser parser;
  auto& socket = client_.socket();
  char peek[128];
  while (parser.state() == ProxyHeaderParser::State::need_more) {
    auto [ec, n] = co_await socket.async_receive(net::buffer(peek), tcp::socket::message_peek, nothrow);
    ec = timed(ec);
    if (!ec && n == 0) ec = net::error::eof;
    std::size_t take = 0;
    if (!ec) {
      take = parser.feed({peek, n});
      if (parser.state() == ProxyHeaderParser::State::invalid) break;
      std::tie(ec, n) = co_await net::async_read(socket, net::buffer(peek, take), nothrow);
      ec = timed(ec);
    }
    if (ec) {
      idle_ = false;
      // A connection closed before its first byte (a balancer's TCP health check) is not counted.
      if (ec == beast::error::timeout) bump(rejected.timeout);
      else if (parser.consumed() > 0) bump(rejected.malformed);
      spdlog::debug("client {}: no PROXY protocol header: {}", client_ip_, ec.message());
      co_return false;
    }
  }
  idle_ = false;
  if (parser.state() == ProxyHeaderParser::State::invalid) {
    bump(rejected.malformed);
    spdlog::debug("client {}: refused: PROXY protocol header: {}", client_ip_, parser.error());
    co_return false;
  }
  if (const auto& source = parser.source()) {
    client_addr_ = unmapped(*source);
    client_ip_ = ip_text(client_addr_).view();
  }
  co_return true;
}

ClientAddress DownstreamSession::client_of(const http::RequestHead& req) const noexcept {
  return resolve_client(req, client_ip_, client_addr_, snapshot_->config->server.trusted_proxies);
}

// The answer for a request the route turns away, or status 0 to let it in.
ProxyError DownstreamSession::admit(const RouteAdmission* admission, const http::RequestHead& req,
                          std::string_view target, const ClientAddress& client) const noexcept {
  return admit_request(admission, client, req, target, worker_.clock.now(), worker_.index);
}

}  // namespace sluice::proxy
