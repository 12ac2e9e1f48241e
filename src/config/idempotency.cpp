#include "sluice/config/idempotency.hpp"

#include <algorithm>
#include <charconv>

namespace sluice::idempotency {

bool Config::stores_status(unsigned status) const noexcept {
  if (std::find(store_codes.begin(), store_codes.end(), status) != store_codes.end()) return true;
  // 429 asks the client to come back: like a 5xx, it is never replayed unless listed by code.
  if (status == 429 || status < 100 || status >= 600) return false;
  return (store_classes & (1u << (status / 100))) != 0;
}

RedisAddress parse_redis_url(const std::string& url) {
  RedisAddress a;
  constexpr std::string_view scheme = "redis://";
  std::string_view rest(url);
  if (!rest.starts_with(scheme)) {
    a.why = "expected \"memory\" or \"redis://HOST:PORT/DB\", got '" + url + "'";
    return a;
  }
  rest.remove_prefix(scheme.size());
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    const auto db = rest.substr(slash + 1);
    if (!db.empty()) {
      const auto r = std::from_chars(db.data(), db.data() + db.size(), a.db);
      if (r.ec != std::errc() || r.ptr != db.data() + db.size() || a.db > 15) {
        a.why = "database must be a number 0..15, got '" + std::string(db) + "'";
        return a;
      }
    }
  }
  if (authority.find('@') != std::string_view::npos) {
    a.why = "credentials in the URL are not supported; use a loopback or private Redis";
    return a;
  }
  // "host:port" or "[v6]:port"; the port is optional.
  const auto close = authority.find(']');
  const auto colon = authority.rfind(':');
  if (colon != std::string_view::npos && (close == std::string_view::npos || colon > close)) {
    const auto port = authority.substr(colon + 1);
    unsigned value = 0;
    const auto r = std::from_chars(port.data(), port.data() + port.size(), value);
    if (r.ec != std::errc() || r.ptr != port.data() + port.size() || value == 0 || value > 65535) {
      a.why = "bad port '" + std::string(port) + "'";
      return a;
    }
    a.port = static_cast<std::uint16_t>(value);
    authority = authority.substr(0, colon);
  }
  if (authority.size() >= 2 && authority.front() == '[' && authority.back() == ']')
    authority = authority.substr(1, authority.size() - 2);
  if (authority.empty()) {
    a.why = "missing host in '" + url + "'";
    return a;
  }
  a.host = std::string(authority);
  a.ok = true;
  return a;
}

}  // namespace sluice::idempotency
