#pragma once
// The byte tunnel an Upgrade becomes once the origin answered 101 Switching Protocols (WebSocket
// and friends): bytes are copied both ways until both sides closed or one failed.
//
// Back-pressure: each direction reads into its own fixed buffer and reads again only when the
// write of what it read to the other side finished, so a slow reader slows its writer down to
// its own pace and sluice never holds more than one buffer per direction. Nothing is allocated
// per message.
//
// The relay is a template on the two stream types so that TLS streams (asio::ssl::stream) can be
// tunnelled by the same code; tunnel.cpp instantiates it for plain TCP on both sides. What
// differs by stream type (half-close, abort) goes through TunnelStream<S>, which a TLS stream may
// specialise.
//
// The decision to close a tunnel from outside (idle, drain, reload) is TunnelWatch: pure, on
// time points, so that its rules are unit-tested without sockets.
#include <cstdint>
#include <span>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/stream_traits.hpp>

#include "sluice/core/clock.hpp"
#include "sluice/endpoint/outcomes.hpp"

namespace sluice::proxy {

// Per stream type: what the relay does at the edges. The default acts on the lowest layer (the
// TCP socket).
template <class Stream>
struct TunnelStream {
  // The other side finished sending (EOF): pass the half-close on, the other direction goes on.
  static void half_close(Stream& s) {
    boost::system::error_code ignored;
    boost::beast::get_lowest_layer(s).shutdown(boost::asio::ip::tcp::socket::shutdown_send, ignored);
  }
  // One side failed: end both at once (pending operations complete with an error).
  static void abort(Stream& s) {
    boost::system::error_code ignored;
    boost::beast::get_lowest_layer(s).close(ignored);
  }
};

struct TunnelIo {
  std::span<char> up_buffer;        // client -> origin
  std::span<char> down_buffer;      // origin -> client
  std::string_view client_pending;  // client bytes already read (after its request head): sent first
  std::string_view origin_pending;  // origin bytes already read (after its 101 head): sent first
  const Clock* clock = nullptr;
  Clock::time_point* last_activity = nullptr;  // stamped on every completed read and write
};

struct TunnelStats {
  std::uint64_t up = 0;    // bytes client -> origin
  std::uint64_t down = 0;  // bytes origin -> client
  bool failed = false;     // a side failed (reset, closed by sluice): not both half-closed
};

// Copies bytes both ways until both directions saw EOF (each passed on as a half-close) or one
// failed (then both streams are aborted). Never throws.
template <class ClientStream, class OriginStream>
boost::asio::awaitable<TunnelStats> relay(ClientStream& client, OriginStream& origin, TunnelIo io);

// Whether an open tunnel should be closed from outside. The session asks check() at each
// next_check(); the verdict is final once it is not `keep`.
class TunnelWatch {
public:
  using Verdict = TunnelVerdict;  // declared with the counters that count it (endpoint/outcomes.hpp)
  // How often a tunnel looks at its server's drain flag and at the config version: the precision
  // of tunnel_drain_timeout.
  static constexpr std::chrono::milliseconds check_period{250};

  TunnelWatch(Clock::time_point opened, Clock::duration idle_timeout) noexcept
      : last_activity(opened), idle_timeout_(idle_timeout) {}

  // `config_replaced`: the config the tunnel was opened under is no longer the newest (a reload);
  // `server_draining`: its server is draining now. Either starts the drain timeout (once: a
  // second reload does not postpone it); the server being undrained before the end cancels its
  // part. `drain_timeout` is the newest config's tunnel_drain_timeout.
  Verdict check(Clock::time_point now, Clock::duration drain_timeout, bool config_replaced,
                bool server_draining) noexcept;
  // When check() must be asked next: the earliest of the idle expiry, the drain expiry and
  // now + check_period.
  Clock::time_point next_check(Clock::time_point now) const noexcept;

  Clock::time_point last_activity;  // written by the relay
  Clock::time_point closes_at() const noexcept { return std::min(retire_at_, drain_at_); }

private:
  Clock::duration idle_timeout_;
  Clock::time_point retire_at_ = Clock::time_point::max();  // after a reload
  Clock::time_point drain_at_ = Clock::time_point::max();   // while the server is draining
};

const char* to_string(TunnelWatch::Verdict v) noexcept;

}  // namespace sluice::proxy
