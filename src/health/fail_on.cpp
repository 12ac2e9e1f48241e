#include "sluice/health/fail_on.hpp"

#include <array>

namespace sluice::health {

std::string describe(const LiveResult& result) {
  if (!result.detail.empty()) return std::string(result.detail);
  switch (result.kind) {
    case LiveResult::Kind::response: return std::to_string(result.status);
    case LiveResult::Kind::connect: return "connect";
    case LiveResult::Kind::timeout: return "timeout";
    case LiveResult::Kind::reset: return "reset";
  }
  return "unknown";
}

std::optional<FailOn> FailOn::parse(std::span<const std::string> items, std::string* error) {
  FailOn f;
  for (const auto& item : items) {
    if (item == "connect") {
      f.connect_ = true;
    } else if (item == "timeout") {
      f.timeout_ = true;
    } else if (item == "reset") {
      f.reset_ = true;
    } else {
      std::string why;
      const auto statuses = StatusMatcher::parse(item, &why);
      if (!statuses) {
        if (error != nullptr) {
          *error = "bad fail_on item '" + item +
                   "' (use connect, timeout, reset, or a status, range or class: " + why + ")";
        }
        return std::nullopt;
      }
      f.statuses_.merge(*statuses);
    }
  }
  return f;
}

FailOn FailOn::defaults() {
  static const std::array<std::string, 6> items{"connect", "timeout", "reset", "502", "503", "504"};
  return *parse(items);
}

bool FailOn::counts(const LiveResult& result) const noexcept {
  switch (result.kind) {
    case LiveResult::Kind::response: return statuses_.match(result.status);
    case LiveResult::Kind::connect: return connect_;
    case LiveResult::Kind::timeout: return timeout_;
    case LiveResult::Kind::reset: return reset_;
  }
  return false;
}

std::string FailOn::to_string() const {
  std::string out;
  const auto add = [&out](std::string_view s) {
    if (!out.empty()) out += ',';
    out += s;
  };
  if (connect_) add("connect");
  if (timeout_) add("timeout");
  if (reset_) add("reset");
  if (!statuses_.empty()) add(statuses_.to_string());
  return out;
}

}  // namespace sluice::health
