#pragma once
// Outcomes that a server's counters (EndpointCounters) count by kind, where the kind is decided
// above this module: why a retry was not made (proxy/retry.hpp) and why an upgrade tunnel ended
// (proxy/tunnel.hpp). Declared here, below proxy/, so that the counter arrays are sized from the
// enums they are indexed by; proxy/ names them as its own (proxy::RetrySkip,
// proxy::TunnelWatch::Verdict). Each enum's last enumerator ends its `_count`.
#include <cstddef>
#include <cstdint>

namespace sluice {

enum class RetrySkip : std::uint8_t {
  none,               // retry allowed
  not_retryable,      // this failure or status is not listed in `on`
  response_started,   // the client already has part of the answer
  not_idempotent,     // the request reached the server and may have had an effect
  body_too_large,     // body bytes were sent and not kept for replay
  budget_exhausted,   // the upstream's retry budget has no token left in this window
  no_other_server,    // every available server was tried
  deadline,           // no time left for another try
  attempts_exhausted, // `attempts` reached
};
inline constexpr std::size_t retry_skip_count = static_cast<std::size_t>(RetrySkip::attempts_exhausted) + 1;

// Whether an open tunnel should be closed from outside; once a tunnel ended, why: `keep` is a
// tunnel a peer closed (close or error), `idle` tunnel_idle_timeout, `drained`
// tunnel_drain_timeout.
enum class TunnelVerdict : std::uint8_t { keep, idle, drained };
inline constexpr std::size_t tunnel_verdict_count = static_cast<std::size_t>(TunnelVerdict::drained) + 1;

}  // namespace sluice
