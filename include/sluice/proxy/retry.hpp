#pragma once
// Retry policy: the one place that decides, from an attempt's Failure (proxy/failure.hpp),
// whether the request may go to another server. Pure functions and a lock-free budget; the
// Failure carries the facts (what failed, whether a byte reached the server, whether the
// response started), RequestFacts the request's.
//
// Rules:
//  - never once the response has started streaming to the client;
//  - only for failures listed in `on` (connect, refused, reset, timeout, status codes);
//  - a request that provably never reached the server (connect failed, or the connection failed
//    before any request byte was written) may be retried whatever its method;
//  - otherwise only an idempotent method (RFC 9110 §9.2.2) or a request carrying the
//    idempotency header;
//  - a body that was not kept for replay (larger than `buffer`) only when none of it was sent;
//  - within the budget, the deadline and the attempt count, and on a server not tried yet.
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "sluice/config/config.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/endpoint/outcomes.hpp"
#include "sluice/proxy/failure.hpp"

namespace sluice::proxy {

// Why a retry was not made; declared with the counters that count it (endpoint/outcomes.hpp).
using sluice::RetrySkip;
using sluice::retry_skip_count;

std::string_view describe(RetrySkip s);   // metric label: "budget exhausted"
std::string_view explain(RetrySkip s);    // Sluice-Error: "retry budget exhausted"
std::string_view log_token(RetrySkip s);  // access log `retry=`: "budget"

struct RequestFacts {
  bool idempotent_method = false;
  bool has_idempotency_key = false;
  bool body_kept = true;  // no body, or the whole body is buffered for replay
};

// True when the attempt failed in a way `on` lists (a listed status counts as a failure).
bool is_listed(const config::RetryConfig& policy, const Failure& attempt);
// True when the attempt's answer is a trailers-only gRPC answer whose code `on` lists
// ("grpc:unavailable"): retried whatever the method, the body still at hand.
bool grpc_listed(const config::RetryConfig& policy, const Failure& attempt);

// True when the request cannot have reached the origin: resending cannot duplicate work.
bool never_reached_server(const Failure& attempt);

// Eligibility of a retry from the attempt and the request alone (budget, servers, deadline and
// attempts are the forwarder's to check, in that order, with the functions below).
RetrySkip eligibility(const config::RetryConfig& policy, const Failure& attempt,
                      const RequestFacts& request);

// Full-jitter exponential backoff before retry number `retry` (1-based): uniform in
// [0, min(backoff_max, backoff * 2^(retry-1))]. `unit` is a uniform random number in [0, 1).
std::chrono::nanoseconds backoff_delay(const config::RetryConfig& policy, unsigned retry, double unit);

}  // namespace sluice::proxy
