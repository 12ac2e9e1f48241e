// The TLS steps of a session, kept apart from downstream_session.cpp: the listener-side handshake, the
// upstream-side connect, whose Failure names why the handshake failed.
#include <cstdio>

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
  co_return true;
}

// Upstream TLS on the connected `upstream`, within the connect deadline already set: SNI and the
// name to verify (tls_server_name, else the server's host), then the handshake. A certificate the
// CA does not vouch for fails the attempt; there is no fallback to an unverified connection.
net::awaitable<Failure> DownstreamSession::connect_tls(const Upstream& u, Endpoint& ep, socket_type& upstream) {
  auto* context = u.tls_context();
  if (context == nullptr) {  // the endpoint turned TLS in a newer snapshot than this request's
    // Sluice's own state, not the server's failure: it does not count against the server.
    auto failure = Failure::of(FailureKind::tls_failed, "upstream tls handshake failed: not configured");
    failure.source = FailureSource::internal;
    co_return failure;
  }
  upstream.start_tls(context->context());
  SSL* ssl = upstream.tls()->native_handle();
  if (!context->prepare(ssl, u.tls_server_name(ep))) {
    co_return Failure::of(FailureKind::tls_failed, "upstream tls handshake failed: bad server name");
  }
  auto [ec] = co_await upstream.async_handshake(net::ssl::stream_base::client, nothrow);
  if (!ec) co_return Failure{};
  if (ec == net::error::operation_aborted && timed_out_) co_return Failure::of(FailureKind::connect_timeout);
  if (const char* why = tls::verify_error(ssl)) {
    std::snprintf(tls_failure_, sizeof tls_failure_, "upstream certificate verify failed: %s", why);
  } else {
    std::snprintf(tls_failure_, sizeof tls_failure_, "upstream tls handshake failed: %s",
                  ec.message().c_str());
  }
  spdlog::debug("upstream {} server {}: {}", u.name(), ep.identity(), tls_failure_);
  co_return Failure::of(FailureKind::tls_failed, tls_failure_);
}

// A pooled connection is reused only with the TLS settings of this request's snapshot: a reload
// that turned TLS on or off, or changed the CA or the client certificate, retires it (its
// SSL_CTX is the snapshot's ClientContext it was made with).
bool DownstreamSession::tls_fits(const Upstream& u, const Endpoint& ep, socket_type& pooled) {
  if (pooled.is_tls() != ep.tls()) return false;
  if (!pooled.is_tls()) return true;
  return u.tls_context() != nullptr &&
         SSL_get_SSL_CTX(pooled.tls()->native_handle()) == u.tls_context()->context().native_handle();
}

}  // namespace sluice::proxy
