#include "sluice/proxy/tunnel.hpp"

#include "sluice/tls/stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace sluice::proxy {

namespace net = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);

// State both directions of one tunnel share; they run on one thread (the worker's), so plain
// members suffice.
struct Shared {
  const TunnelIo& io;
  bool failed = false;
  void touch() const { *io.last_activity = io.clock->now(); }
};

// One direction: `pending` first, then read -> write -> read ... A read is started only after
// the previous write completed (back-pressure).
template <class From, class To, class Abort>
net::awaitable<void> pump(From& from, To& to, std::span<char> buffer, std::string_view pending,
                          std::uint64_t& moved, Shared& shared, Abort abort) {
  if (!pending.empty()) {
    auto [ec, n] = co_await net::async_write(to, net::buffer(pending.data(), pending.size()), nothrow);
    moved += n;
    shared.touch();
    if (ec) {
      abort();
      co_return;
    }
  }
  for (;;) {
    // The other direction may have failed while this one was suspended.
    if (shared.failed) co_return;
    auto [ec, n] = co_await from.async_read_some(net::buffer(buffer.data(), buffer.size()), nothrow);
    if (n > 0 && !shared.failed) {
      shared.touch();
      auto [wec, written] = co_await net::async_write(to, net::buffer(buffer.data(), n), nothrow);
      moved += written;
      shared.touch();
      if (wec) {
        abort();
        co_return;
      }
    }
    if (ec) {
      if (ec == net::error::eof && !shared.failed) {
        TunnelStream<To>::half_close(to);
      } else {
        abort();
      }
      co_return;
    }
  }
}

}  // namespace

template <class ClientStream, class OriginStream>
net::awaitable<TunnelStats> relay(ClientStream& client, OriginStream& origin, TunnelIo io) {
  using namespace net::experimental::awaitable_operators;
  TunnelStats stats;
  Shared shared{io};
  const auto abort = [&] {
    if (shared.failed) return;
    shared.failed = true;
    TunnelStream<ClientStream>::abort(client);
    TunnelStream<OriginStream>::abort(origin);
  };
  co_await (pump(client, origin, io.up_buffer, io.client_pending, stats.up, shared, abort) &&
            pump(origin, client, io.down_buffer, io.origin_pending, stats.down, shared, abort));
  stats.failed = shared.failed;
  co_return stats;
}

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
