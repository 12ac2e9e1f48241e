#include "sluice/proxy/tunnel_session.hpp"

#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

namespace sluice::proxy {

namespace net = boost::asio;
using boost::system::error_code;

TunnelSession::TunnelSession(WorkerContext& worker, TunnelHandoff handoff)
    : worker_(worker), h_(std::move(handoff)),
      watch_(worker.clock.now(), h_.upstream->config().tunnel_idle_timeout) {
  worker_.sessions.push_back(*this);
}

TunnelSession::~TunnelSession() {
  if (is_linked()) worker_.sessions.erase(worker_.sessions.iterator_to(*this));
}

// The relay block's halves, one per direction, with what came with the heads first.
TunnelIo TunnelSession::io() {
  const auto half = relay_block_size / 2;
  std::span<char> up(h_.relay.get(), half), down(h_.relay.get() + half, half);
  const std::string_view client_pending =
      h_.client_extra.empty() ? std::string_view(up.data(), h_.client_pending) : h_.client_extra;
  const std::string_view origin_pending =
      h_.origin_extra.empty() ? std::string_view(down.data(), h_.origin_pending) : h_.origin_extra;
  return {up, down, client_pending, origin_pending, &worker_.clock, &watch_.last_activity};
}

net::awaitable<void> TunnelSession::run() {
  constexpr auto nothrow = net::as_tuple(net::use_awaitable);
  if (worker_.stopping) close();  // the shutdown timeout came between the 101 and now
  h_.server->begin_tunnel();
  relaying_ = true;
  deadline = watch_.next_check(worker_.clock.now());
  const auto stats = co_await relay(h_.client, h_.origin, io());
  relaying_ = false;
  h_.server->end_tunnel();
  deadline = Clock::time_point::max();
  closed(stats);
  if (h_.client.is_tls() && !closed_) {
    // close_notify before the FIN (RFC 8446 §6.1), bounded as the HTTP session bounds it.
    deadline = worker_.clock.now() + std::chrono::seconds(1);
    co_await h_.client.async_tls_shutdown(nothrow);
    deadline = Clock::time_point::max();
  }
  if (!closed_) {
    error_code ignored;
    h_.client.shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  }
  close();
}

void TunnelSession::expire() {
  if (!relaying_) {  // the close_notify took too long
    deadline = Clock::time_point::max();
    error_code ignored;
    h_.client.cancel(ignored);
    return;
  }
  const auto now = worker_.clock.now();
  // The newest config says how long a drain lasts; the tunnel's own config is replaced once the
  // worker has a newer one.
  const auto& newest = *worker_.snapshot;
  const auto verdict = watch_.check(now, newest.config->server.tunnel_drain_timeout,
                                    worker_.snapshot != h_.snapshot, h_.server->draining());
  if (verdict == TunnelWatch::Verdict::keep) {
    deadline = watch_.next_check(now);
    return;
  }
  verdict_ = verdict;
  deadline = Clock::time_point::max();
  close();
}

void TunnelSession::close() {
  if (closed_) return;
  closed_ = true;
  error_code ignored;
  h_.client.shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  h_.client.close(ignored);
  h_.origin.close(ignored);
}

// The tunnel's end: counted (why it closed, the exchange's status class and duration), logged.
void TunnelSession::closed(const TunnelStats& stats) {
  auto& counters = h_.server->counters(worker_.index);
  EndpointCounters::bump(counters.tunnels_closed[static_cast<std::size_t>(verdict_)]);
  const auto duration =
      std::chrono::duration_cast<std::chrono::microseconds>(worker_.clock.now() - h_.start);
  counters.count_exchange(1, duration);  // 101: the origin's answer
  spdlog::debug("upstream {} server {}: tunnel closed ({}): {} bytes up, {} bytes down",
                h_.upstream->name(), h_.server->identity(),
                verdict_ != TunnelWatch::Verdict::keep ? to_string(verdict_)
                : stats.failed                          ? "reset"
                                                        : "closed by both sides",
                stats.up, stats.down);
  if (!h_.log || !worker_.access_log.enabled()) return;
  auto r = h_.log->record();
  r.bytes_in += stats.up;
  r.bytes_out += stats.down;
  r.duration = duration;
  worker_.access_log.write(r);
}

}  // namespace sluice::proxy
