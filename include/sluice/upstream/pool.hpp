#pragma once
// Idle keep-alive connections to origins, one pool per worker (so no locks), indexed by endpoint
// id. A connection enters the pool only after its response was read completely and framed
// correctly; it leaves it when a request takes it, when it has been idle past keepalive_timeout
// (sweep), or when the origin closed it. That is checked at checkout: a connection the last read
// of its answer proved drained, with no edge since and idle for less than `proof_lifetime`, is
// taken as it is; any other gets a non-blocking peek (tls/edge_io.hpp).
#include <cstdint>
#include <optional>
#include <vector>

#include "sluice/core/clock.hpp"
#include "sluice/tls/stream.hpp"
#include "sluice/tls/stream_slot.hpp"

namespace sluice {

class Endpoint;

class ConnectionPool {
public:
  using stream_type = tls::Stream;  // plain or TLS: TLS sessions are pooled as they are

  explicit ConnectionPool(const Clock& clock) : clock_(clock) {}

  // How long a proof that a connection is drained is trusted without a peek. The reactor learns
  // of an origin's FIN at its next look, so one that comes in the current round is missed; an
  // origin closes an idle connection at its own keep-alive timeout, seconds after the answer, so
  // a connection idle for longer than this is asked the kernel again (one recv) before reuse.
  static constexpr Clock::duration proof_lifetime = std::chrono::seconds(1);

  // A live idle connection to `endpoint`, most recently used first (the least likely to have been
  // closed by the origin's idle timer). Discards connections found closed or expired.
  std::optional<stream_type> acquire(const Endpoint& endpoint);
  // The same into `into` (left empty when there is none): the connection's slot moves, not the
  // connection (tls/stream_slot.hpp).
  void acquire(const Endpoint& endpoint, tls::StreamSlot& into);

  // How long connections beyond `max_idle` (the surplus a burst leaves) stay before the sweep
  // closes them, oldest first, down to `max_idle`. A stalled origin piles the in-flight requests
  // onto itself, and when it recovers they all come back at once; closing the surplus then (as
  // nginx's keepalive cache does) made the next stall open as many connections again. HAProxy
  // keeps every idle connection and purges over time (pool-purge-delay, 5 s); this keeps the
  // surplus for a bounded time, shorter than common origin idle timeouts (Node.js: 5 s), and
  // number (surplus_factor).
  static constexpr Clock::duration surplus_linger = std::chrono::seconds(2);
  // At most surplus_factor * max_idle idle connections per endpoint, surplus included, or as
  // many as checkouts found none in the current or the last sweep interval, when that is more:
  // a multiplexing client's streams come back in bursts and are asked for again at once, and
  // closing what such a burst returns only opens as many connections again. (A checkout that
  // finds none means every connection was in use: no more are kept than were in use together.)
  static constexpr std::uint32_t surplus_factor = 2;

  // Keeps `stream` for reuse unless the endpoint is draining, max_idle is 0, or the pool for this
  // endpoint already holds as many as it may (above; then the oldest goes). The connections
  // beyond max_idle are closed by the sweep once idle for surplus_linger.
  // `stream` is moved from when kept, closed when not.
  // The slot moves, not the connection (tls/stream_slot.hpp): it is left empty either way.
  void release(const Endpoint& endpoint, tls::StreamSlot&& stream, std::uint32_t max_idle,
               Clock::duration keepalive_timeout);
  // The same for a stream outside a slot (tests, one-off callers): it is moved into a new slot,
  // which allocates, so the data path never takes this way.
  void release_stream(const Endpoint& endpoint, stream_type&& stream, std::uint32_t max_idle,
                      Clock::duration keepalive_timeout);

  // Closes connections idle past their deadline, and a surplus beyond max_idle idle for
  // surplus_linger. Called periodically (once a second) by the worker.
  void sweep();
  // Closes every idle connection to `endpoint` (drain) or to everyone (shutdown).
  void close(const Endpoint& endpoint);
  void close_all();

  std::size_t idle_count() const noexcept;
  // Idle connections by endpoint id ([id] = count; ids beyond the end have none).
  std::vector<std::uint32_t> idle_by_endpoint() const;

private:
  struct Idle {
    tls::StreamSlot stream;
    Clock::time_point released;
    Clock::time_point expires;
  };
  static bool is_alive(stream_type& stream, Clock::duration idle_for) noexcept;

  struct Stack {
    // Oldest first: reuse from the back (the freshest), expiry from the front. Capacity is kept,
    // so steady state allocates nothing.
    std::vector<Idle> idle;
    std::uint32_t keep = 0;  // max_idle of the last release: what the sweep trims the surplus to
    // Checkouts that found no idle connection, since the last sweep and in the interval before.
    std::uint32_t misses = 0, recent_misses = 0;
  };

  const Clock& clock_;
  std::vector<Stack> idle_;  // [endpoint id]
};

}  // namespace sluice
