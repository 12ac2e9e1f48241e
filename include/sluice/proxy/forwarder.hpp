#pragma once
// The attempt loop's decisions (pick -> queue -> attempt -> Failure -> retry decision -> backoff),
// without I/O and without HTTP/1 framing, so that they are unit-tested on time points and the
// loop in the session (Session::forward, session.cpp) is a list of named steps. A step towards the
// Forwarder phase of docs/architecture.md ("Where the data path is heading"). Pure functions:
// any thread.
#include <chrono>
#include <optional>
#include <string_view>

#include "sluice/config/config.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/proxy/failure.hpp"

namespace sluice::proxy {

// The time a request has: each try gets per_try (retry.per_try_timeout, else the response
// timeout), all of them together `deadline` (retry.deadline, else attempts x per_try).
struct AttemptWindow {
  Clock::duration per_try{};
  Clock::time_point deadline{};

  static AttemptWindow of(const config::UpstreamConfig& upstream, Clock::time_point started) noexcept;
  // When the try starting `now` must have its answer.
  Clock::time_point try_until(Clock::time_point now) const noexcept {
    return std::min(deadline, now + per_try);
  }
};

// True when a 503's Retry-After (RFC 9110 §10.2.3, in seconds) asks to come back later than the
// deadline allows: resending sooner would ignore the origin's request.
bool retry_after_exceeds(std::string_view retry_after, Clock::time_point now,
                         Clock::time_point deadline) noexcept;

// How long a connection may idle in the pool: ours (keepalive_timeout), or the origin's own
// (Keep-Alive: timeout=N) with a margin when it is shorter, so that a connection the origin is
// about to close is never reused.
Clock::duration pooled_idle_time(Clock::duration keepalive_timeout,
                                 std::optional<std::chrono::seconds> origin_timeout) noexcept;

// What follows an attempt: its answer goes to the client, another server is tried, or the
// request fails with the attempt's Failure.
enum class AfterAttempt { deliver, retry, give_up };

// An answer (kind none) is delivered unless its status is listed in `retry.on` and a retry is
// allowed; a failure is retried when allowed, else it stands. `attempts_left`: this was not the
// last attempt `retry.attempts` allows. `may_retry()` (the budget, deadline and servers left;
// it counts why not) is asked only when the answer depends on it.
template <class MayRetry>
AfterAttempt after_attempt(const Failure& f, bool listed, bool attempts_left, MayRetry&& may_retry) {
  if (!f.failed())
    return listed && attempts_left && may_retry() ? AfterAttempt::retry : AfterAttempt::deliver;
  if (!attempts_left) return AfterAttempt::give_up;
  return may_retry() ? AfterAttempt::retry : AfterAttempt::give_up;
}

}  // namespace sluice::proxy
