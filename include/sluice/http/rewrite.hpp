#pragma once
// Header rewriting between client and origin (RFC 9110 §7.6.1 hop-by-hop fields; de-facto
// X-Forwarded-* conventions). Runs on the worker thread that owns the message; no shared state.
#include <string_view>

#include "sluice/http/message.hpp"

namespace sluice::http {

// ---- Upgrade (RFC 9110 §7.8) ------------------------------------------------------------------
// sluice forwards a protocol switch only for an HTTP/1.1 GET without a body whose Connection
// lists the "upgrade" option and whose Upgrade names a protocol other than h2c (HTTP/2 over
// cleartext is never forwarded: the origin would speak HTTP/2 to a client that negotiated with
// us, RFC 9113 §3.1 removed it anyway). Anything else loses its Upgrade like any hop-by-hop field.

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

// True for a (validated) Transfer-Encoding value other than plain "chunked".
bool has_codings_before_chunked(std::string_view transfer_encoding) noexcept;

// 1..128 visible ASCII characters: a client's X-Request-Id we keep (choose_request_id()).
bool sane_request_id(std::string_view id) noexcept;

// False for a Connection option naming a field that must survive hop-by-hop stripping whatever the
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
