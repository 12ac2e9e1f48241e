#include "sluice/config/config.hpp"

#include <algorithm>
#include <thread>

namespace sluice::config {

std::string HostPort::to_string() const {
  // RFC 3986 §3.2.2: an IPv6 literal is bracketed so that its colons are not read as the port's.
  const bool is_ipv6 = host.find(':') != std::string::npos;
  std::string text = is_ipv6 ? "[" + host + "]" : host;
  return text + ":" + std::to_string(port);
}

namespace {
constexpr std::string_view hash_key_kinds[] = {"client_ip", "uri", "header", "cookie", "query"};
}  // namespace

HostPort HostPort::reachable() const {
  if (host == "0.0.0.0") return {"127.0.0.1", port};
  if (host == "::") return {"::1", port};
  return *this;
}

std::optional<HashKeySpec> HashKeySpec::parse(std::string_view text) {
  const auto colon = text.find(':');
  const auto kind = text.substr(0, colon);
  for (std::size_t i = 0; i < std::size(hash_key_kinds); ++i) {
    if (kind != hash_key_kinds[i]) continue;
    const bool named = i >= static_cast<std::size_t>(Kind::header);
    // client_ip and uri take no name; the others need one.
    if (named != (colon != std::string_view::npos) || (named && colon + 1 == text.size()))
      return std::nullopt;
    HashKeySpec spec;
    spec.kind = static_cast<Kind>(i);
    if (named) spec.name = std::string(text.substr(colon + 1));
    return spec;
  }
  return std::nullopt;
}

std::string HashKeySpec::to_string() const {
  std::string text(hash_key_kinds[static_cast<std::size_t>(kind)]);
  if (!name.empty()) text.append(":").append(name);
  return text;
}

std::string route_label(std::string_view host, std::string_view path_prefix) {
  std::string label(host.empty() ? std::string_view("*") : host);
  label.append(path_prefix);
  return label;
}

const ErrorPage* ErrorPages::find(unsigned status) const noexcept {
  const ErrorPage* of_class = nullptr;
  for (const auto& page : pages) {
    if (page.status == status) return &page;
    if (page.status == status / 100) of_class = &page;
  }
  return of_class;
}

unsigned ServerSection::worker_count() const {
  return workers != 0 ? workers : std::max(1u, std::thread::hardware_concurrency());
}

const UpstreamConfig* Config::find_upstream(std::string_view name) const {
  const auto it = std::find_if(upstreams.begin(), upstreams.end(),
                               [name](const UpstreamConfig& u) { return u.name == name; });
  return it == upstreams.end() ? nullptr : &*it;
}

const KeyValue* Config::find_key(std::string_view path) const {
  const auto it = std::find_if(keys.begin(), keys.end(),
                               [path](const KeyValue& k) { return k.path == path; });
  return it == keys.end() ? nullptr : &*it;
}

}  // namespace sluice::config
