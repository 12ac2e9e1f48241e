#pragma once
// One failed (or answered) attempt on one server, as a value built where the I/O failed
// (Pingora's `Error { etype, esource, retry }`, HAProxy's SF_ERR_* + PR_RE_*). What follows from
// it is a function of it, each in one place:
//  - whether it tells of the server (passive health): tells_of_server() below; whether it counts
//    against it: the upstream's FailOn (fail_on.hpp), through names() below like `retry.on`;
//  - whether it may be retried and why not: proxy::eligibility() (proxy/retry.hpp);
//  - the status and Sluice-Error the client sees: proxy::status_of(), proxy::sluice_error()
//    (proxy/failure.hpp).
// Here, below both the proxy and the health module, so that the endpoint's counters are sized from
// the kinds and the prober can speak the same language. A plain value: no thread rules.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::health {

// What went wrong. `none`: the origin answered, with Failure::status (which a `retry.on` or
// `fail_on` list may still treat as a failure). The order is the index of the endpoint's
// per-kind retry counters ([0]: a listed status), so new kinds go at the end.
enum class FailureKind : std::uint8_t {
  none,
  connect_refused,
  connect_timeout,
  connect_error,
  reset_before_send,  // the connection failed before any request byte was written
  reset_after_send,   // ... after the request was (partly) sent
  response_timeout,
  bad_response,
  client_failed,  // not the origin's fault: the client went away or broke framing mid-request
  tls_failed,     // the TLS handshake with the origin failed (certificate rejected, protocol)
  send_timeout,   // the origin stopped reading the request body for send_timeout
};
inline constexpr std::size_t failure_kind_count = static_cast<std::size_t>(FailureKind::send_timeout) + 1;

// Who is to blame: the origin (counts against it), the client (counts against nobody), or sluice
// itself (a setting that cannot work, e.g. TLS to a server whose snapshot has no TLS context).
enum class FailureSource : std::uint8_t { upstream, client, internal };

struct Failure {
  FailureKind kind = FailureKind::none;
  FailureSource source = FailureSource::upstream;
  bool request_bytes_sent = false;       // any byte of the request was written to the origin
  bool reused_connection = false;        // the attempt ran on a pooled connection
  bool response_bytes_received = false;  // any byte of the origin's response head arrived
  bool response_started = false;         // any byte of the response reached the client
  unsigned status = 0;                   // the origin's status, when kind is none
  // A gRPC answer that is its trailers alone (HEADERS with END_STREAM): its grpc-status, 0..16;
  // no_grpc_status otherwise.
  static constexpr std::uint8_t no_grpc_status = 0xff;
  std::uint8_t grpc_status = no_grpc_status;
  // Finer Sluice-Error text ("upstream certificate verify failed: ..."); empty: the kind's words.
  // Must outlive the failure's answer (static storage or the session's).
  std::string_view detail{};

  static constexpr Failure answered(unsigned status) noexcept {
    return {FailureKind::none, FailureSource::upstream, true, false, true, false, status, no_grpc_status, {}};
  }
  static constexpr Failure of(FailureKind kind, std::string_view detail = {}) noexcept {
    Failure f;
    f.kind = kind;
    f.source = kind == FailureKind::client_failed ? FailureSource::client : FailureSource::upstream;
    f.detail = detail;
    return f;
  }
  bool failed() const noexcept { return kind != FailureKind::none; }
};

// The kind's words: "connect refused", "upstream reset" ("" for none).
std::string_view describe(FailureKind kind) noexcept;

// The connection was a pooled one the origin had closed while idle: it broke before any response
// byte, on a reset (not a timeout, not a bad answer). Not the server's failure.
bool stale_connection(const Failure& f) noexcept;

// Whether the attempt tells anything of the server's health: not the client's failure, not
// sluice's own, not a stale pooled connection. Whether it counts against the server is then the
// upstream's FailOn::counts().
bool tells_of_server(const Failure& f) noexcept;

// The words of a `passive.fail_on` or `retry.on` list, and the one mapping from failure kinds to
// them that both lists use: `connect` names every failure to set the connection up (refused,
// timed out, unreachable, its TLS handshake), `refused` a refused connect, `timeout` a connect,
// response or send timeout, `reset` a connection that broke during the exchange or an answer
// that could not be read (a malformed head). The client's failures are named by none.
struct FailureWords {
  bool connect = false;
  bool refused = false;
  bool timeout = false;
  bool reset = false;
};
bool names(const FailureWords& words, FailureKind kind) noexcept;

// A live failure in a health reason ("failure 1 of 3 in 10s: connect refused"): the answer's
// status ("502"), else the failure's words.
std::string describe_live(const Failure& f);

}  // namespace sluice::health
