#pragma once
// Idle keep-alive connections to origins, one pool per worker (so no locks), indexed by endpoint
// id. A connection enters the pool only after its response was read completely and framed
// correctly; it leaves it when a request takes it, when it has been idle past keepalive_timeout
// (sweep), or when the origin closed it (checked with a non-blocking peek before reuse).
#include <cstdint>
#include <optional>
#include <vector>

#include "sluice/core/clock.hpp"
#include "sluice/tls/stream.hpp"

namespace sluice {

class Endpoint;

class ConnectionPool {
public:
  using stream_type = tls::Stream;  // plain or TLS: TLS sessions are pooled as they are

  explicit ConnectionPool(const Clock& clock) : clock_(clock) {}

  // A live idle connection to `endpoint`, most recently used first (the least likely to have been
  // closed by the origin's idle timer). Discards connections found closed or expired.
  std::optional<stream_type> acquire(const Endpoint& endpoint);

  // Keeps `stream` for reuse unless the pool for this endpoint already holds max_idle connections
  // or the endpoint is draining.
  void release(const Endpoint& endpoint, stream_type stream, std::uint32_t max_idle,
               Clock::duration keepalive_timeout);

  // Closes connections idle past their deadline. Called periodically by the worker.
  void sweep();
  // Closes every idle connection to `endpoint` (drain) or to everyone (shutdown).
  void close(const Endpoint& endpoint);
  void close_all();

  std::size_t idle_count() const noexcept;
  // Idle connections by endpoint id ([id] = count; ids beyond the end have none).
  std::vector<std::uint32_t> idle_by_endpoint() const;

private:
  struct Idle {
    stream_type stream;
    Clock::time_point expires;
  };
  static bool is_alive(stream_type& stream) noexcept;

  const Clock& clock_;
  // [endpoint id] -> idle connections, oldest first: reuse from the back (the freshest), expiry
  // from the front. Capacity is kept, so steady state allocates nothing.
  std::vector<std::vector<Idle>> idle_;
};

}  // namespace sluice
