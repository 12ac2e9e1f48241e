#pragma once
// Request -> route (upstream group and edge rules). Built once per config snapshot, then read
// concurrently by every worker without locks. Host match: exact (case-insensitive, port ignored)
// or "*.suffix"; an empty route host matches any. Among matching routes the longest path_prefix
// wins; on equal prefixes an exact host beats a wildcard, which beats no host. Without routes, the
// single upstream takes every request (with its own header rules).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/compress/eligibility.hpp"
#include "sluice/http/edge_rules.hpp"

namespace sluice {

class Upstream;
namespace proxy {
class RouteAdmission;
}
namespace config {
struct ErrorPages;
}

class Router {
public:
  struct Route {
    std::string host;         // lowercase; "" = any, "*.example.com" = wildcard
    std::string path_prefix;  // starts with '/'
    const Upstream* upstream = nullptr;  // null for a route that answers itself
    // Edge rules (docs/edge.md), the upstream's and the route's composed into one flat form.
    http::HeaderRules request_rules;
    http::HeaderRules response_rules;
    std::optional<http::PathRewrite> rewrite;
    std::optional<http::FixedAnswer> answer;  // `return`: answered without an upstream
    std::string label{};  // "*/api/", "example.com/": host ("*" = any) and prefix, for logs
    const proxy::RouteAdmission* admission = nullptr;  // allow/deny/rate_limit; null = none
    // The route's own error_pages (in the snapshot's config); null = the server's alone.
    const config::ErrorPages* error_pages = nullptr;
    // Response compression (docs/compression.md): the route's `compress`, else its upstream's, in
    // the snapshot's config; null = none.
    const compress::Policy* compress = nullptr;
    bool require_client_cert = false;  // 403 unless the connection's client certificate verified
  };

  Router() = default;
  explicit Router(std::vector<Route> routes, const Upstream* fallback,
                  http::HeaderRules fallback_request = {}, http::HeaderRules fallback_response = {},
                  const compress::Policy* fallback_compress = nullptr);

  // Null when nothing matches (the proxy answers 404). Without routes, the single upstream's
  // route (label "", no admission). The route lives as long as the router.
  const Route* match(std::string_view host, std::string_view target) const noexcept;
  const Upstream* route(std::string_view host, std::string_view target) const noexcept {
    const Route* r = match(host, target);
    return r != nullptr ? r->upstream : nullptr;
  }

private:
  std::vector<Route> routes_;  // sorted: most specific first, so the first match wins
  Route fallback_;             // used when there are no routes (upstream null: none)
};

}  // namespace sluice
