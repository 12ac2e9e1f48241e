// The TLS handshake of a TLS listener's connection, kept apart from downstream_session.cpp.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "sluice/proxy/downstream_session.hpp"

namespace sluice::proxy {

namespace net = boost::asio;
using boost::system::error_code;

namespace {
constexpr auto nothrow = net::as_tuple(net::use_awaitable);
}

// TLS listener: the handshake, within header_timeout (a client that never completes it holds the
// connection no longer than a slow request head would). Failures are the client's business
// (scanners, wrong versions, untrusted certificates): logged at debug and counted, not errors.
net::awaitable<bool> DownstreamSession::tls_handshake() {
  idle_ = true;  // graceful shutdown closes a connection still shaking hands
  expire_from_now(worker_.snapshot->config->server.header_timeout);
  auto [ec] = co_await client_.async_handshake(net::ssl::stream_base::server, nothrow);
  ec = timed(ec);
  idle_ = false;
  if (ec) {
    EndpointCounters::bump(worker_.tls_handshake_failures);
    spdlog::debug("client {}: TLS handshake failed: {}", client_ip_, ec.message());
    co_return false;
  }
  EndpointCounters::bump(worker_.tls_handshakes);
  if (tls_->verify_client() != tls::VerifyClient::off)
    client_cert_ = std::make_unique<const tls::ClientCertificate>(
        tls::read_client_certificate(client_.tls()->native_handle()));
  co_return true;
}

}  // namespace sluice::proxy
