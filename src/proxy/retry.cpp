#include "sluice/proxy/retry.hpp"

#include <algorithm>
#include <cmath>

namespace sluice::proxy {

std::string_view describe(RetrySkip s) {
  switch (s) {
    case RetrySkip::none: return "none";
    case RetrySkip::not_retryable: return "not retryable";
    case RetrySkip::response_started: return "response started";
    case RetrySkip::not_idempotent: return "not idempotent";
    case RetrySkip::body_too_large: return "body too large";
    case RetrySkip::budget_exhausted: return "budget exhausted";
    case RetrySkip::no_other_server: return "no other server";
    case RetrySkip::deadline: return "deadline";
    case RetrySkip::attempts_exhausted: return "attempts exhausted";
  }
  return "unknown";
}

std::string_view explain(RetrySkip s) {
  switch (s) {
    case RetrySkip::budget_exhausted: return "retry budget exhausted";
    case RetrySkip::no_other_server: return "no other server to try";
    case RetrySkip::deadline: return "deadline reached";
    case RetrySkip::attempts_exhausted: return "attempts exhausted";
    case RetrySkip::not_retryable: return "not listed in retry.on";
    default: return describe(s);
  }
}

std::string_view log_token(RetrySkip s) {
  switch (s) {
    case RetrySkip::none: return "";
    case RetrySkip::not_retryable: return "not_retryable";
    case RetrySkip::response_started: return "response_started";
    case RetrySkip::not_idempotent: return "not_idempotent";
    case RetrySkip::body_too_large: return "body_too_large";
    case RetrySkip::budget_exhausted: return "budget";
    case RetrySkip::no_other_server: return "no_other_server";
    case RetrySkip::deadline: return "deadline";
    case RetrySkip::attempts_exhausted: return "attempts";
  }
  return "unknown";
}

bool never_reached_server(const Failure& a) {
  switch (a.kind) {
    case FailureKind::connect_refused:
    case FailureKind::connect_timeout:
    case FailureKind::connect_error:
    case FailureKind::tls_failed:  // no request byte is written before the handshake ends
    case FailureKind::reset_before_send: return true;
    default: return false;
  }
}

bool is_listed(const config::RetryConfig& p, const Failure& a) {
  if (a.failed()) return health::names({p.on_connect, p.on_refused, p.on_timeout, p.on_reset}, a.kind);
  return grpc_listed(p, a) || std::find(p.on_status.begin(), p.on_status.end(), a.status) != p.on_status.end();
}

bool grpc_listed(const config::RetryConfig& p, const Failure& a) {
  return !a.failed() && a.grpc_status < 32 && (p.on_grpc >> a.grpc_status & 1u) != 0;
}

RetrySkip eligibility(const config::RetryConfig& p, const Failure& a, const RequestFacts& r) {
  if (a.response_started) return RetrySkip::response_started;
  if (!is_listed(p, a)) return RetrySkip::not_retryable;
  if (never_reached_server(a) || !a.request_bytes_sent || grpc_listed(p, a)) {
    // Nothing reached the origin, or the service said it did nothing in a code the operator
    // listed. The body must still be at hand to resend it.
    return r.body_kept ? RetrySkip::none : RetrySkip::body_too_large;
  }
  if (!r.idempotent_method && !r.has_idempotency_key) return RetrySkip::not_idempotent;
  if (!r.body_kept) return RetrySkip::body_too_large;
  return RetrySkip::none;
}

std::chrono::nanoseconds backoff_delay(const config::RetryConfig& p, unsigned retry, double unit) {
  using std::chrono::nanoseconds;
  const auto base = std::chrono::duration_cast<nanoseconds>(p.backoff).count();
  const auto cap = std::chrono::duration_cast<nanoseconds>(p.backoff_max).count();
  const unsigned shift = std::min(retry == 0 ? 0u : retry - 1, 30u);
  const double ceiling = std::min(static_cast<double>(cap), static_cast<double>(base) * std::ldexp(1.0, static_cast<int>(shift)));
  return nanoseconds(static_cast<std::int64_t>(ceiling * std::clamp(unit, 0.0, 1.0)));
}

}  // namespace sluice::proxy
