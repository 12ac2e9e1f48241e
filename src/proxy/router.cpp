#include "sluice/proxy/router.hpp"

#include <algorithm>

#include "sluice/config/config.hpp"

namespace sluice {

namespace {

char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != b[i]) return false;  // b is already lowercase
  return true;
}

int host_rank(const std::string& h) noexcept {
  if (h.empty()) return 0;
  return h.front() == '*' ? 1 : 2;
}

bool host_matches(const std::string& pattern, std::string_view host) noexcept {
  if (pattern.empty()) return true;
  if (pattern.front() == '*') {  // "*.example.com" matches "a.example.com", not "example.com"
    const std::string_view suffix = std::string_view(pattern).substr(1);
    return host.size() > suffix.size() && iequals(host.substr(host.size() - suffix.size()), suffix);
  }
  return iequals(host, pattern);
}

}  // namespace

Router::Router(std::vector<Route> routes, const Upstream* fallback,
               http::HeaderRules fallback_request, http::HeaderRules fallback_response,
               const compress::Policy* fallback_compress)
    : routes_(std::move(routes)) {
  fallback_.upstream = fallback;
  fallback_.compress = fallback_compress;
  fallback_.request_rules = std::move(fallback_request);
  fallback_.response_rules = std::move(fallback_response);
  for (auto& r : routes_) {
    for (auto& c : r.host) c = lower(c);
    r.label = config::route_label(r.host, r.path_prefix);
  }
  std::stable_sort(routes_.begin(), routes_.end(), [](const Route& a, const Route& b) {
    if (a.path_prefix.size() != b.path_prefix.size()) return a.path_prefix.size() > b.path_prefix.size();
    return host_rank(a.host) > host_rank(b.host);
  });
}

const Router::Route* Router::match(std::string_view host, std::string_view target) const noexcept {
  if (routes_.empty()) return fallback_.upstream != nullptr ? &fallback_ : nullptr;
  const auto bare_host = http::host_without_port(host);
  for (const auto& r : routes_)
    if (target.starts_with(r.path_prefix) && host_matches(r.host, bare_host)) return &r;
  return nullptr;
}

}  // namespace sluice
