#pragma once
// The definition of relay() (tunnel.hpp), for the translation units that instantiate it:
// tunnel.cpp for the session's stream types, the tests for beast::test::stream.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "sluice/proxy/tunnel.hpp"

namespace sluice::proxy {

namespace tunnel_detail {

namespace net = boost::asio;
inline constexpr auto nothrow = net::as_tuple(net::use_awaitable);

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

}  // namespace tunnel_detail

template <class ClientStream, class OriginStream>
boost::asio::awaitable<TunnelStats> relay(ClientStream& client, OriginStream& origin, TunnelIo io) {
  using namespace boost::asio::experimental::awaitable_operators;
  TunnelStats stats;
  tunnel_detail::Shared shared{io};
  const auto abort = [&] {
    if (shared.failed) return;
    shared.failed = true;
    TunnelStream<ClientStream>::abort(client);
    TunnelStream<OriginStream>::abort(origin);
  };
  using tunnel_detail::pump;
  co_await (pump(client, origin, io.up_buffer, io.client_pending, stats.up, shared, abort) &&
            pump(origin, client, io.down_buffer, io.origin_pending, stats.down, shared, abort));
  stats.failed = shared.failed;
  co_return stats;
}

}  // namespace sluice::proxy
