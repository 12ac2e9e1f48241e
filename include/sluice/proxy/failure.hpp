#pragma once
// The proxy's side of a failed attempt (health/failure.hpp holds the value): the status and the
// Sluice-Error the client is told, each a function of the Failure alone. Retry eligibility is
// proxy/retry.hpp's eligibility(), passive health is health::tells_of_server() and the upstream's
// FailOn.
#include <string_view>

#include "sluice/config/failure.hpp"
#include "sluice/proxy/error_response.hpp"

namespace sluice::proxy {

using health::Failure;
using health::failure_kind_count;
using health::FailureKind;
using health::FailureSource;

// 502, or 504 when the origin took too long (response_timeout, send_timeout).
unsigned status_of(FailureKind kind) noexcept;
inline unsigned status_of(const Failure& f) noexcept { return status_of(f.kind); }

// The Sluice-Error value: the failure's detail if it has one, else its kind's words.
std::string_view sluice_error(const Failure& f) noexcept;

// The answer to a failure that was not retried; `not_retried` (static storage) says why
// ("upstream reset; not retried: retry budget exhausted").
ProxyError error_for(const Failure& f, std::string_view not_retried = {}) noexcept;

}  // namespace sluice::proxy
