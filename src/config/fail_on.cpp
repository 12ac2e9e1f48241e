#include "sluice/config/fail_on.hpp"

#include <array>
#include <cctype>

namespace sluice::health {

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
    case FailureItem::Word::connect: words_.connect = true; break;
    case FailureItem::Word::refused: words_.refused = true; break;
    case FailureItem::Word::reset: words_.reset = true; break;
    case FailureItem::Word::timeout: words_.timeout = true; break;
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

bool FailOn::counts(const Failure& f) const noexcept {
  return f.failed() ? names(words_, f.kind) : statuses_.match(f.status);
}

std::string FailOn::to_string() const {
  std::string out;
  const auto add = [&out](std::string_view s) {
    if (!out.empty()) out += ',';
    out += s;
  };
  if (words_.connect) add("connect");
  if (words_.refused) add("refused");
  if (words_.timeout) add("timeout");
  if (words_.reset) add("reset");
  if (!statuses_.empty()) add(statuses_.to_string());
  return out;
}

}  // namespace sluice::health
