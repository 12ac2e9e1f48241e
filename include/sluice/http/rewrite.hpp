#pragma once
// Header rewriting between client and origin (RFC 9110 §7.6.1 hop-by-hop fields; de-facto
// X-Forwarded-* conventions). Runs on the worker thread that owns the message; no shared state.
#include <string_view>

#include "sluice/http/message.hpp"

namespace sluice::http {

// Removes Connection and every field it names, Keep-Alive, Proxy-Connection, TE, Trailer,
// Transfer-Encoding and Upgrade. (The caller re-adds its own framing: chunked or Content-Length.)
void strip_hop_by_hop(Fields& fields);

struct ForwardedFor {
  std::string_view client_ip;  // peer address of the client connection, no port
  std::string_view proto;      // "http" or "https"
  std::string_view request_id; // value to put in X-Request-Id (already chosen by the caller)
};

// Request towards the origin: strip hop-by-hop fields, append the client to X-Forwarded-For
// (joining existing values with ", "), set X-Forwarded-Proto, set X-Forwarded-Host from Host
// (when present), set X-Request-Id. Host itself is kept unchanged.
void rewrite_request(Fields& fields, const ForwardedFor& info);

// Response towards the client: strip hop-by-hop fields, echo X-Request-Id.
void rewrite_response(Fields& fields, std::string_view request_id);

// The X-Request-Id to use: the client's own when present and sane (1..128 visible ASCII chars),
// else a fresh one written into `storage` from `gen`.
class RequestIdGenerator;
std::string_view choose_request_id(const Fields& fields, RequestIdGenerator& gen,
                                   char (&storage)[37]);

}  // namespace sluice::http
