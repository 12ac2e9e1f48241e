#pragma once
// The Forwarder phase of the data path (docs/architecture.md): the attempt loop of one request on
// one upstream, pick -> queue -> attempt -> Failure -> retry decision -> backoff, and nothing of
// HTTP/1 framing on the client side. forward_attempts() is the loop; what it asks of the side
// that drives it (one try on a server, the delivery of an answer, the error answer, a timer)
// comes through a hooks value, so that an HTTP/2 client side can drive it later and the unit
// tests drive it with scripted attempts (tests/proxy/forwarder_test.cpp). Forwarder holds the
// loop's state and makes its decisions, without I/O.
//
// One worker's thread: a Forwarder lives on the frame of the request it serves.
#include <array>
#include <chrono>
#include <optional>
#include <string_view>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/static_string/static_string.hpp>

#include "sluice/balancer/balancer.hpp"
#include "sluice/config/config.hpp"
#include "sluice/http/head_index.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/proxy/error_response.hpp"
#include "sluice/proxy/failure.hpp"
#include "sluice/proxy/retry.hpp"
#include "sluice/upstream/upstream.hpp"

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


// What the attempt loop records of one request for the access log and the counters: the servers
// tried, the attempts, why the last failure was not retried, and the last attempt's times
// (upstream_connect_ms, upstream_first_byte_ms; zero = not reached; the attempt sets the last two).
struct AttemptRecord {
  using ServersText = boost::static_strings::static_string<256>;

  Endpoint* server = nullptr;  // the last server tried
  unsigned attempts = 0;
  RetrySkip skip = RetrySkip::none;
  Clock::time_point attempt_start{}, upstream_ready{}, first_byte{};
  // The servers tried, in order (the first `capacity`): their names are written out only when
  // they are logged, servers_tried().
  static constexpr std::size_t capacity = 16;
  std::array<const Endpoint*, capacity> tried;  // [0, tried_count) set
  std::size_t tried_count = 0;

  // "app-1,app-2" into `out` (bounded by its capacity).
  std::string_view servers_tried(ServersText& out) const;
};

// The balancer's context of a request: the hash of the upstream's key (hash upstreams), read
// from the request head and the client's address.
PickContext request_pick_context(const Upstream& upstream, const http::RequestHead& req,
                                 std::string_view client_ip);

// What an attempt says of the server's health (health::tells_of_server, then the upstream's
// fail_on), counted and logged: nothing
// for a failure that is not the server's (a stale pooled connection, the client's, sluice's own).
void report_attempt(const Upstream& upstream, Endpoint& ep, unsigned worker, const Failure& f);

// The attempt's time to its first response byte, into the server's estimate (Endpoint::
// first_byte_time(), which least_time reads), for least_time upstreams only. An
// attempt that got no byte of an answer (refused, reset, timed out) gives no sample: passive
// health and the in-flight count are what steer away from those.
void record_first_byte_time(const Upstream& upstream, Endpoint& ep, const AttemptRecord& record);

// Ends an in-flight count on a server (begun by Endpoint::try_begin_request or begin_request),
// however it ends: an attempt's, or a tunnel's (TunnelHandoff), which moves with its streams.
class InFlight {
public:
  InFlight() = default;
  explicit InFlight(Endpoint& e) noexcept : e_(&e) {}
  ~InFlight() {
    if (e_ != nullptr) e_->end_request();
  }
  InFlight(InFlight&& other) noexcept : e_(std::exchange(other.e_, nullptr)) {}
  InFlight& operator=(InFlight&& other) noexcept {
    if (this != &other) {
      if (e_ != nullptr) e_->end_request();
      e_ = std::exchange(other.e_, nullptr);
    }
    return *this;
  }

private:
  Endpoint* e_ = nullptr;
};

// How often a request waiting in the upstream's queue looks for a free slot: slots free on any
// worker, and the look costs little (only while every candidate is at max_conns).
inline constexpr std::chrono::milliseconds queue_poll{1};

class Forwarder {
public:
  // What the loop does next.
  struct Step {
    enum class Kind { attempt, pick_again, wait_in_queue, refuse } kind;
    Endpoint* server = nullptr;  // kind attempt: its slot is taken, its in-flight count begun
  };

  // The attempts begin: the request counts for the retry budget, and its time window starts.
  // `base`: the balancer's context of the request (its key's hash); `record` outlives this.
  Forwarder(const Upstream& upstream, const Clock& clock, unsigned worker, RequestFacts facts,
            PickContext base, AttemptRecord& record);
  ~Forwarder();  // leaves the queue if still in it (the request was abandoned there)
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  // The next server: picked, or the queue to wait in (every candidate at max_conns), or none
  // (refuse: the answer is error()).
  Step next();
  // After a wait of queue_poll in the queue; `open`: the client side is still there.
  Step queue_step(bool open);
  // When the try starting now must have its answer.
  Clock::time_point try_until() const noexcept { return window_.try_until(clock_.now()); }
  // The attempt on `ep` ended with `last`: reported for passive health, then the decision.
  // `replayable`: the request's body can be sent again (kept whole, or none of it consumed);
  // `retry_after`: a 503's Retry-After. give_up sets error().
  AfterAttempt after(Endpoint& ep, const Failure& last, bool replayable, std::string_view retry_after);
  // The full-jitter backoff before the next try (`unit` uniform in [0, 1)), bounded by the
  // deadline; zero: none.
  Clock::duration backoff(double unit) const;
  // After the backoff: false (error() set) when the deadline passed meanwhile.
  bool next_attempt();
  // The answer when no server's will do.
  const ProxyError& error() const noexcept { return error_; }

private:
  PickContext context() const noexcept;
  Step refuse(ProxyError error) noexcept;
  Step enter_queue();
  Step begin_attempt(std::uint32_t index, bool reserved);
  bool pick_fallback(PickContext& ctx, Pick& pick);
  bool may_retry(const Failure& last, std::string_view retry_after);
  ProxyError not_retried(const Failure& f) const noexcept;
  void note_server(const Endpoint& ep);
  void note_skip(RetrySkip skip);

  const Upstream& upstream_;
  const Clock& clock_;
  unsigned worker_;
  RequestFacts facts_;
  PickContext base_;
  AttemptRecord& record_;
  AttemptWindow window_;
  TriedSet tried_;
  unsigned attempt_ = 1;
  Failure last_;  // the last attempt's (kind none: no attempt failed yet, or it answered)
  ProxyError error_;
  std::uint64_t ticket_ = 0;  // the queue's, while in it
  Clock::time_point queue_until_{};
};

// The attempt loop. Returns whether the client connection may carry a next request. `hooks`,
// first and by value (it lives in this coroutine's frame; a class of hooks can take its frames
// from the worker's FramePool, SLUICE_POOLED_COROUTINES_TAKING), provides:
//   awaitable<Failure> attempt(Endpoint&, Clock::time_point try_until);  // one try
//   awaitable<bool> tunnel(Endpoint&);        // a 101 answered: the connection's last use
//   bool respond_now(bool& reusable);         // the answer to the client when it can go with
//                                             //   no wait (then true, `reusable` as respond()'s);
//                                             //   false: respond() delivers it (or the rest)
//   awaitable<bool> respond();                // the answer to the client; true: the upstream
//                                             //   connection may be reused
//   bool delivered(Endpoint&, bool reusable); // after the answer: the client may send more
//   void drop();                              // the answer of an attempt not delivered
//   awaitable<void> fail(const ProxyError&);  // sluice's own answer
//   awaitable<bool> wait(Clock::duration);    // a timer; false: the client side was closed
//   bool replayable();                        // the body can be sent again
//   std::string_view retry_after();           // the answer's Retry-After
//   double uniform();                         // uniform in [0, 1), for the backoff's jitter
// Switching Protocols stays in flight on its server until the tunnel ends; every other try's
// in-flight count ends with the try.
template <class Hooks>
boost::asio::awaitable<bool> forward_attempts(Hooks hooks, Forwarder& f) {
  using Kind = Forwarder::Step::Kind;
  for (;;) {
    auto step = f.next();
    while (step.kind == Kind::wait_in_queue) {
      const bool open = co_await hooks.wait(queue_poll);
      step = f.queue_step(open);
    }
    if (step.kind == Kind::refuse) break;
    if (step.kind == Kind::pick_again) continue;  // its last slot was taken meanwhile
    Endpoint& ep = *step.server;
    Failure last;
    {
      InFlight in_flight(ep);
      last = co_await hooks.attempt(ep, f.try_until());
      if (!last.failed() && last.status == 101) co_return co_await hooks.tunnel(ep);
    }
    if (last.kind == FailureKind::client_failed) co_return false;
    const auto retry_after = last.status == 503 ? hooks.retry_after() : std::string_view();
    const auto next = f.after(ep, last, hooks.replayable(), retry_after);
    if (next == AfterAttempt::deliver) {
      // A small answer usually goes at once, with no coroutine of the relay's (~600 instructions
      // per request less, bench/callgrind.sh with 64 connections).
      bool reusable = false;
      if (!hooks.respond_now(reusable)) reusable = co_await hooks.respond();
      co_return hooks.delivered(ep, reusable);
    }
    hooks.drop();  // the answer is dropped with its connection (body unread)
    if (next == AfterAttempt::give_up) break;
    const auto delay = f.backoff(hooks.uniform());
    if (delay > Clock::duration::zero()) {  // no co_await inside && (GCC 12 miscompiles it)
      const bool open = co_await hooks.wait(delay);
      if (!open) co_return false;
    }
    if (!f.next_attempt()) break;
  }
  co_await hooks.fail(f.error());
  co_return false;
}

}  // namespace sluice::proxy
