#include "sluice/config/fail_on.hpp"

#include <array>
#include <cctype>

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

std::optional<FailureItem> parse_failure_item(std::string_view item, std::string* why) {
  using W = FailureItem::Word;
  constexpr std::array<std::pair<std::string_view, W>, 4> words{
      {{"connect", W::connect}, {"refused", W::refused}, {"reset", W::reset}, {"timeout", W::timeout}}};
  for (const auto& [text, word] : words)
    if (item == text) return FailureItem{word, {}};
  std::string problem;
  auto statuses = StatusMatcher::parse(item, &problem);
  if (!statuses) {
    // A word gets the list of words; something that starts like a status gets what is wrong
    // with it as a status.
    const bool status_like = !item.empty() && std::isdigit(static_cast<unsigned char>(item[0]));
    if (why != nullptr)
      *why = status_like ? problem
                         : "unknown failure '" + std::string(item) +
                               "'; expected connect, refused, reset, timeout, or a status, range or "
                               "class (\"503\", \"500-504\", \"5xx\")";
    return std::nullopt;
  }
  return FailureItem{W::none, std::move(*statuses)};
}

void FailOn::add(const FailureItem& item) {
  switch (item.word) {
    case FailureItem::Word::connect: connect_ = true; break;
    case FailureItem::Word::refused: refused_ = true; break;
    case FailureItem::Word::reset: reset_ = true; break;
    case FailureItem::Word::timeout: timeout_ = true; break;
    case FailureItem::Word::none: statuses_.merge(item.statuses); break;
  }
}

std::optional<FailOn> FailOn::parse(std::span<const std::string> items, std::string* error) {
  FailOn f;
  for (const auto& text : items) {
    const auto item = parse_failure_item(text, error);
    if (!item) return std::nullopt;
    f.add(*item);
  }
  return f;
}

FailOn FailOn::of(std::span<const std::string_view> items) {
  FailOn f;
  for (const auto text : items) f.add(parse_failure_item(text).value());
  return f;
}

bool FailOn::counts(const LiveResult& result) const noexcept {
  switch (result.kind) {
    case LiveResult::Kind::response: return statuses_.match(result.status);
    // The session words a refused connect "connect refused" (see describe()).
    case LiveResult::Kind::connect: return connect_ || (refused_ && result.detail == "connect refused");
    // A connect that timed out is a connect failure too, as for retry.on (docs/configuration.md).
    case LiveResult::Kind::timeout:
      return timeout_ || (connect_ && result.detail == "connect timeout");
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
  if (refused_) add("refused");
  if (timeout_) add("timeout");
  if (reset_) add("reset");
  if (!statuses_.empty()) add(statuses_.to_string());
  return out;
}

}  // namespace sluice::health
