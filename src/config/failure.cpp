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

bool tells_of_server(const Failure& f) noexcept {
  return f.source == FailureSource::upstream && f.kind != FailureKind::client_failed && !stale_connection(f);
}

bool names(const FailureWords& w, FailureKind kind) noexcept {
  using F = FailureKind;
  switch (kind) {
    case F::connect_refused: return w.connect || w.refused;
    case F::connect_timeout: return w.connect || w.timeout;
    case F::connect_error:
    case F::tls_failed: return w.connect;
    case F::reset_before_send:
    case F::reset_after_send:
    case F::bad_response: return w.reset;
    case F::response_timeout:
    case F::send_timeout: return w.timeout;
    case F::client_failed:
    case F::none: break;
  }
  return false;
}

std::string describe_live(const Failure& f) {
  switch (f.kind) {
    case FailureKind::none: return std::to_string(f.status);
    case FailureKind::reset_before_send:
    case FailureKind::reset_after_send: return "connection reset";
    case FailureKind::send_timeout: return "send timeout";
    default: return std::string(describe(f.kind));
  }
}

}  // namespace sluice::health
