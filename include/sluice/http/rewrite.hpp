#pragma once
// Header rewriting between client and origin (RFC 9110 §7.6.1 hop-by-hop fields; de-facto
// X-Forwarded-* conventions). Runs on the worker thread that owns the message; no shared state.
#include <string_view>

#include "sluice/http/message.hpp"

namespace sluice::http {

// Removes Connection and every field it names, Keep-Alive, Proxy-Connection, TE, Trailer,
// Transfer-Encoding, Upgrade and HTTP2-Settings. (The caller re-adds its own framing: chunked or
// Content-Length.)
void strip_hop_by_hop(Fields& fields);

// ---- Upgrade (RFC 9110 §7.8) ------------------------------------------------------------------
// sluice forwards a protocol switch only for an HTTP/1.1 GET without a body whose Connection
// lists the "upgrade" option and whose Upgrade names a protocol other than h2c (HTTP/2 over
// cleartext is never forwarded: the origin would speak HTTP/2 to a client that negotiated with
// us, RFC 9113 §3.1 removed it anyway). Anything else loses its Upgrade like any hop-by-hop field.
bool wants_upgrade(const Fields& fields, unsigned version, bool is_get, bool has_body) noexcept;

// True when `protocol` (one Upgrade list element, "name[/version]") names h2c.
bool is_h2c(std::string_view protocol) noexcept;

struct ForwardedFor {
  std::string_view client_ip;  // peer address of the client connection, no port
  std::string_view proto;      // "http" or "https"
  std::string_view request_id; // value to put in X-Request-Id (already chosen by the caller)
  // wants_upgrade() said yes: keep Upgrade (less h2c) and send "Connection: upgrade".
  bool upgrade = false;
  // server.forwarded_header = "add": append our hop to Forwarded (RFC 7239 §4) as well.
  bool forwarded = false;
};

// Request towards the origin: strip hop-by-hop fields, append the client to X-Forwarded-For
// (joining existing values with ", "), set X-Forwarded-Proto, set X-Forwarded-Host from Host
// (when present), set X-Request-Id; with info.forwarded, append "for=CLIENT;host=\"HOST\";proto=P"
// to Forwarded the same way. Host itself is kept unchanged. With info.upgrade the
// Upgrade field survives as one line without h2c, with "Connection: upgrade" as the only option.
void rewrite_request(Fields& fields, const ForwardedFor& info);

// Is a 101 answer acceptable for a request forwarded with upgrade? Its Upgrade must be present and
// name only protocols the request offered (RFC 9110 §7.8: a server MUST NOT switch to a protocol
// the client did not ask for); `request` is the forwarded request's fields.
bool valid_switch(const Fields& response, const Fields& request) noexcept;

// Response towards the client: strip hop-by-hop fields, echo X-Request-Id. For a 101
// (`switching`) the origin's Upgrade is kept and "Connection: upgrade" sent, as the client needs.
// A Transfer-Encoding with codings before chunked ("gzip, chunked") is kept as it is: the body is
// relayed unchanged, re-chunked, and those codings describe it.
void rewrite_response(Fields& fields, std::string_view request_id, bool switching = false);

// True for a (validated) Transfer-Encoding value other than plain "chunked".
bool has_codings_before_chunked(std::string_view transfer_encoding) noexcept;

// What an origin may not pass on through us, for final and interim heads alike: every Sluice-*
// field, and Content-Length / Transfer-Encoding on a 1xx, 204 or 304.
void strip_origin_claims(Fields& fields, unsigned status);

// The X-Request-Id to use: the client's own when present and sane (1..128 visible ASCII chars),
// else a fresh one written into `storage` from `gen`.
class RequestIdGenerator;
std::string_view choose_request_id(const Fields& fields, RequestIdGenerator& gen,
                                   char (&storage)[37]);

// 1..128 visible ASCII characters: a client's X-Request-Id we keep (choose_request_id()).
bool sane_request_id(std::string_view id) noexcept;

// False for a Connection option naming a field that must survive strip_hop_by_hop() whatever the
// client says: Connection, Host, Content-Length, X-Request-Id (see rewrite.cpp).
bool connection_may_drop(std::string_view option) noexcept;

// Calls f(element) for each element of a comma-separated list value (RFC 9110 §5.6.1: empty
// elements and the whitespace around elements ignored). f returns false to stop; then so does
// this function.
template <class F>
bool for_each_list_element(std::string_view rest, F&& f) {
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    auto item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty() && !f(item)) return false;
  }
  return true;
}

}  // namespace sluice::http
