#pragma once
// The request key a `hash` upstream balances on (`hash_key = "client_ip" | "uri" |
// "header:NAME" | "cookie:NAME" | "query:NAME"`), extracted without allocating. A request without
// the key (no such header, cookie or query parameter) has none, and the hash policy falls back to
// round robin for it.
#include <optional>
#include <string>
#include <string_view>

#include "sluice/config/config.hpp"
#include "sluice/http/message.hpp"

namespace sluice {
namespace http { class RequestHead; }

class HashKey {
public:
  using Kind = config::HashKeySpec::Kind;

  explicit HashKey(config::HashKeySpec spec) : kind_(spec.kind), name_(std::move(spec.name)) {}

  // The key's bytes for this request, pointing into the head's bytes, `target` or `client_ip`.
  std::optional<std::string_view> extract(const http::RequestHead& head, std::string_view target,
                                          std::string_view client_ip) const;

  Kind kind() const noexcept { return kind_; }
  const std::string& name() const noexcept { return name_; }

private:
  Kind kind_ = Kind::client_ip;
  std::string name_;  // header, cookie or query parameter name
};

}  // namespace sluice
