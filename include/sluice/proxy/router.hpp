#pragma once
// Request -> upstream group. Built once per config snapshot, then read concurrently by every
// worker without locks. Host match: exact (case-insensitive, port ignored) or "*.suffix"; an empty
// route host matches any. Among matching routes the longest path_prefix wins; on equal prefixes
// an exact host beats a wildcard, which beats no host. Without routes, the single upstream takes
// every request.
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

class Upstream;
namespace proxy {
class RouteAdmission;
}

class Router {
public:
  struct Route {
    std::string host;         // lowercase; "" = any, "*.example.com" = wildcard
    std::string path_prefix;  // starts with '/'
    const Upstream* upstream = nullptr;
    std::string label{};  // "*/api/", "example.com/": host ("*" = any) and prefix, for logs
    const proxy::RouteAdmission* admission = nullptr;  // allow/deny/rate_limit; null = none
  };

  Router() = default;
  explicit Router(std::vector<Route> routes, const Upstream* fallback);

  // Null when nothing matches (the proxy answers 404). `label`, when given, gets the matched
  // route's label ("" without routes or match); it lives as long as the router.
  const Upstream* route(std::string_view host, std::string_view target,
                        std::string_view* label = nullptr) const noexcept;
  // The matching route's admission rules (null when it has none, or nothing matches).
  const proxy::RouteAdmission* admission(std::string_view host, std::string_view target) const noexcept;

private:
  const Route* match(std::string_view host, std::string_view target) const noexcept;

  std::vector<Route> routes_;  // sorted: most specific first, so the first match wins
  const Upstream* fallback_ = nullptr;
};

}  // namespace sluice
