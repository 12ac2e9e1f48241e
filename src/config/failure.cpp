#include "sluice/config/failure.hpp"

namespace sluice::health {

std::string_view describe(FailureKind kind) noexcept {
  switch (kind) {
    case FailureKind::none: return "";
    case FailureKind::connect_refused: return "connect refused";
    case FailureKind::connect_timeout: return "connect timeout";
    case FailureKind::connect_error: return "connect failed";
    case FailureKind::reset_before_send: return "upstream reset before request sent";
    case FailureKind::reset_after_send: return "upstream reset";
    case FailureKind::response_timeout: return "response timeout";
    case FailureKind::bad_response: return "bad response";
    case FailureKind::client_failed: return "client failed";
    case FailureKind::tls_failed: return "upstream tls handshake failed";
    case FailureKind::send_timeout: return "upstream send timeout";
  }
  return "upstream error";
}

bool stale_connection(const Failure& f) noexcept {
  return f.reused_connection && !f.response_bytes_received &&
         (f.kind == FailureKind::reset_before_send || f.kind == FailureKind::reset_after_send);
}

std::optional<LiveResult> live_result(const Failure& f) noexcept {
  if (f.source != FailureSource::upstream || stale_connection(f)) return std::nullopt;
  switch (f.kind) {
    case FailureKind::none: return LiveResult::response(f.status);
    case FailureKind::connect_refused: return LiveResult::connect_failure("connect refused");
    case FailureKind::connect_timeout: return LiveResult::timeout("connect timeout");
    case FailureKind::connect_error: return LiveResult::connect_failure("connect failed");
    case FailureKind::response_timeout: return LiveResult::timeout("response timeout");
    case FailureKind::send_timeout: return LiveResult::timeout("send timeout");
    case FailureKind::bad_response: return LiveResult::response(502);
    case FailureKind::client_failed: return std::nullopt;
    case FailureKind::reset_before_send:
    case FailureKind::reset_after_send:
    case FailureKind::tls_failed: break;
  }
  return LiveResult::reset("connection reset");
}

}  // namespace sluice::health
