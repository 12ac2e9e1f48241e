#include "sluice/balancer/hash_key.hpp"

#include "sluice/http/head_index.hpp"

namespace sluice {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Finds `name` in "a=1; b=2" (RFC 6265 §5.4 cookie-string) or "a=1&b=2" (query), by exact name.
std::optional<std::string_view> find_pair(std::string_view list, std::string_view name, char sep) {
  while (!list.empty()) {
    const auto end = list.find(sep);
    const auto item = trim(list.substr(0, end));
    const auto eq = item.find('=');
    if (eq != std::string_view::npos && item.substr(0, eq) == name) return item.substr(eq + 1);
    if (end == std::string_view::npos) break;
    list.remove_prefix(end + 1);
  }
  return std::nullopt;
}

// The first line of the header (head[name]), the cookie's value in any Cookie line.
std::optional<std::string_view> header_value(const http::RequestHead& head, std::string_view name) {
  const auto* f = head.find(name);
  if (f == nullptr) return std::nullopt;
  return head.value(*f);
}
std::optional<std::string_view> cookie_value(const http::RequestHead& head, std::string_view name) {
  std::optional<std::string_view> found;
  head.for_each(http::KnownField::cookie, [&](const http::IndexedField& f) {
    if (!found) found = find_pair(head.value(f), name, ';');
  });
  return found;
}

}  // namespace

std::optional<std::string_view> HashKey::extract(const http::RequestHead& head, std::string_view target,
                                                 std::string_view client_ip) const {
  switch (kind_) {
    case Kind::client_ip: return client_ip;
    case Kind::uri: return target;
    case Kind::header: return header_value(head, name_);
    case Kind::cookie: return cookie_value(head, name_);
    case Kind::query: {
      const auto q = target.find('?');
      if (q == std::string_view::npos) return std::nullopt;
      auto query = target.substr(q + 1);
      query = query.substr(0, query.find('#'));
      return find_pair(query, name_, '&');
    }
  }
  return std::nullopt;
}

}  // namespace sluice
