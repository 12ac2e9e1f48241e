#pragma once
// Active probes by the gRPC health checking protocol (grpc/grpc doc/health-checking.md), for an
// upstream's [health] protocol = "grpc": a unary call to /grpc.health.v1.Health/Check over
// HTTP/2 (h2c, or TLS with ALPN h2), whose answer must say SERVING. nghttp2's client session does
// the framing and HPACK; the two protobuf messages (one field each) are written and read here.
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include "sluice/health/server_health.hpp"
#include "sluice/tls/stream.hpp"

namespace sluice::health {

inline constexpr std::string_view grpc_health_path = "/grpc.health.v1.Health/Check";

// The request's body: one uncompressed gRPC message holding HealthCheckRequest{service}.
std::string grpc_health_request(std::string_view service);

// What came back for the call.
struct GrpcAnswer {
  unsigned status = 0;      // HTTP :status; 0 = no answer head
  std::string grpc_status;  // from the trailers, or a trailers-only head; "" = none
  std::string grpc_message;
  std::string body;         // the DATA received, its first bytes
  bool complete = false;    // the stream ended (END_STREAM), rather than reset or cut
};

// SERVING passes. Anything else fails, its reason saying what came ("grpc-status 12
// (UNIMPLEMENTED): ...", "health status NOT_SERVING").
ProbeResult judge_grpc_health(const GrpcAnswer& answer);

// The call on `socket` (connected, and with TLS negotiated h2 by ALPN when `tls`), read until its
// stream ends. An I/O error (the prober's deadline closes the socket) ends it early, in `error`.
boost::asio::awaitable<GrpcAnswer> grpc_health_call(tls::Stream& socket, std::string_view authority,
                                                   std::string_view service, bool tls,
                                                   boost::system::error_code& error);

}  // namespace sluice::health
