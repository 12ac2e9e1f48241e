#include "sluice/proxy/failure.hpp"

namespace sluice::proxy {

unsigned status_of(FailureKind kind) noexcept {
  // RFC 9110 §15.6.5: 504 when the upstream did not answer in time, else 502 (§15.6.3).
  return kind == FailureKind::response_timeout || kind == FailureKind::send_timeout ? 504 : 502;
}

std::string_view sluice_error(const Failure& f) noexcept {
  return f.detail.empty() ? health::describe(f.kind) : f.detail;
}

ProxyError error_for(const Failure& f, std::string_view not_retried) noexcept {
  ProxyError error{status_of(f), sluice_error(f)};
  error.not_retried = not_retried;
  return error;
}

}  // namespace sluice::proxy
