#pragma once
// The connection after a valid 101 Switching Protocols. It takes both
// streams from the HTTP session, which then ends and gives back everything a request held (its
// head buffers, arena, coroutine frames, the session itself), as Beast's advanced server hands an
// upgraded socket from its http_session to a websocket_session. Bytes go both ways (relay(),
// tunnel.hpp) until both sides closed or one failed, or TunnelWatch closes the tunnel (idle,
// drain, reload); the exchange is counted and logged then, with the bytes the tunnel carried.
//
// Lives on one worker for its whole life, on the coroutine running run() (Worker::serve_tunnel),
// in the worker's session list (expire() and shutdown). Not thread-safe: only the worker's thread
// touches it.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "sluice/core/clock.hpp"
#include "sluice/proxy/forwarder.hpp"
#include "sluice/proxy/snapshot.hpp"
#include "sluice/proxy/tunnel.hpp"
#include "sluice/proxy/worker_context.hpp"
#include "sluice/telemetry/access_log.hpp"
#include "sluice/tls/stream.hpp"

namespace sluice::proxy {

// What the HTTP session hands over once the 101 reached the client.
struct TunnelHandoff {
  // Takes the tunnel's own in-flight count on `server` (the attempt's ends with the attempt).
  TunnelHandoff(tls::Stream client_stream, tls::Stream origin_stream,
                std::shared_ptr<const Snapshot> exchange_snapshot, const Upstream& its_upstream,
                Endpoint& its_server, PooledBlock relay_block)
      : client(std::move(client_stream)), origin(std::move(origin_stream)),
        snapshot(std::move(exchange_snapshot)), upstream(&its_upstream), server(&its_server),
        relay(std::move(relay_block)) {
    its_server.begin_request();
    in_flight = InFlight(its_server);
  }

  tls::Stream client;
  tls::Stream origin;
  std::shared_ptr<const Snapshot> snapshot;  // the exchange's: keeps its upstream and server alive
  const Upstream* upstream = nullptr;
  Endpoint* server = nullptr;
  // The tunnel's in-flight count on its server (drains wait for it, max_conns caps it).
  InFlight in_flight;
  // The exchange's relay block (relay_block_size bytes, from the worker's relay_blocks, back there
  // when the handoff or the tunnel ends): one half per direction. Bytes that came with the heads
  // (a client that did not wait for the 101, the origin's first frame) are at the start of their
  // half, or in `*_extra` when longer than it.
  PooledBlock relay;
  std::size_t client_pending = 0, origin_pending = 0;
  std::string client_extra, origin_extra;
  Clock::time_point start;  // of the exchange: the access log's duration
  std::optional<HeldAccessRecord> log;  // when the access log is on
};

class TunnelSession final : public SessionLink {
public:
  TunnelSession(WorkerContext& worker, TunnelHandoff handoff);
  ~TunnelSession();
  TunnelSession(const TunnelSession&) = delete;
  TunnelSession& operator=(const TunnelSession&) = delete;

  boost::asio::awaitable<void> run();

  // While relaying: TunnelWatch's check (idle, drain, reload), then the next one or the close;
  // after it, the bounded TLS close_notify ends.
  void expire() override;
  // Graceful shutdown lets an open tunnel run until shutdown_timeout (docs/configuration.md).
  void close_if_idle() override {}
  void close() override;
  bool holds_upstream() const noexcept override { return true; }

private:
  TunnelIo io();
  void closed(const TunnelStats& stats);

  WorkerContext& worker_;
  TunnelHandoff h_;
  TunnelWatch watch_;
  TunnelWatch::Verdict verdict_ = TunnelWatch::Verdict::keep;
  bool relaying_ = false;
  bool closed_ = false;
};

}  // namespace sluice::proxy
