#include "sluice/proxy/tunnel.hpp"

#include "sluice/proxy/tunnel_relay.hpp"
#include "sluice/tls/stream.hpp"

namespace sluice::proxy {

namespace net = boost::asio;

// Plain TCP on both sides (tests), and the session's stream type, plain or TLS on either side.
template net::awaitable<TunnelStats> relay<net::ip::tcp::socket, net::ip::tcp::socket>(
    net::ip::tcp::socket&, net::ip::tcp::socket&, TunnelIo);
template net::awaitable<TunnelStats> relay<tls::Stream, tls::Stream>(tls::Stream&, tls::Stream&,
                                                                     TunnelIo);

TunnelWatch::Verdict TunnelWatch::check(Clock::time_point now, Clock::duration drain_timeout,
                                        bool config_replaced, bool server_draining) noexcept {
  if (config_replaced && retire_at_ == Clock::time_point::max()) retire_at_ = now + drain_timeout;
  if (!server_draining) {
    drain_at_ = Clock::time_point::max();
  } else if (drain_at_ == Clock::time_point::max()) {
    drain_at_ = now + drain_timeout;
  }
  if (now >= closes_at()) return Verdict::drained;
  if (now - last_activity >= idle_timeout_) return Verdict::idle;
  return Verdict::keep;
}

Clock::time_point TunnelWatch::next_check(Clock::time_point now) const noexcept {
  return std::min({last_activity + idle_timeout_, closes_at(), now + Clock::duration(check_period)});
}

const char* to_string(TunnelWatch::Verdict v) noexcept {
  switch (v) {
    case TunnelWatch::Verdict::keep: return "open";
    case TunnelWatch::Verdict::idle: return "tunnel idle timeout";
    case TunnelWatch::Verdict::drained: return "tunnel drain timeout";
  }
  return "unknown";
}

}  // namespace sluice::proxy
