#include "sluice/config/expect_status.hpp"

namespace sluice::health {
namespace {

constexpr unsigned lowest = 100;
constexpr unsigned highest = 599;

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Exactly three digits in [100, 599].
std::optional<unsigned> parse_code(std::string_view s) noexcept {
  if (s.size() != 3 || !is_digit(s[0]) || !is_digit(s[1]) || !is_digit(s[2])) return std::nullopt;
  const unsigned v = (s[0] - '0') * 100u + (s[1] - '0') * 10u + (s[2] - '0');
  if (v < lowest || v > highest) return std::nullopt;
  return v;
}

bool fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

// One item: "204", "300-399" or "2xx". Sets [lo, hi] or explains.
bool parse_item(std::string_view item, unsigned& lo, unsigned& hi, std::string* error) {
  const std::string quoted = "'" + std::string(item) + "'";
  if (item.empty()) return fail(error, "empty item in status list (stray comma?)");
  if (item.size() == 3 && is_digit(item[0]) && (item[1] == 'x' || item[1] == 'X') &&
      (item[2] == 'x' || item[2] == 'X')) {
    const unsigned klass = static_cast<unsigned>(item[0] - '0');
    if (klass < 1 || klass > 5) return fail(error, "bad status class " + quoted + " (use 1xx-5xx)");
    lo = klass * 100;
    hi = lo + 99;
    return true;
  }
  if (const auto dash = item.find('-'); dash != std::string_view::npos) {
    const auto a = parse_code(trim(item.substr(0, dash)));
    const auto b = parse_code(trim(item.substr(dash + 1)));
    if (!a || !b) {
      return fail(error, "bad status range " + quoted + " (expected CODE-CODE, codes 100-599)");
    }
    if (*a > *b) {
      return fail(error, "bad status range " + quoted + ": " + std::to_string(*a) + " is above " +
                             std::to_string(*b));
    }
    lo = *a;
    hi = *b;
    return true;
  }
  const auto code = parse_code(item);
  if (!code) return fail(error, "bad status code " + quoted + " (expected 3 digits, 100-599)");
  lo = hi = *code;
  return true;
}

}  // namespace

std::optional<StatusMatcher> StatusMatcher::parse(std::string_view text, std::string* error) {
  StatusMatcher m;
  if (trim(text).empty()) {
    fail(error, "empty status list");
    return std::nullopt;
  }
  while (true) {
    const auto comma = text.find(',');
    unsigned lo = 0;
    unsigned hi = 0;
    if (!parse_item(trim(text.substr(0, comma)), lo, hi, error)) return std::nullopt;
    for (unsigned c = lo; c <= hi; ++c) m.bits_.set(c);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return m;
}

std::string StatusMatcher::to_string() const {
  std::string out;
  for (unsigned c = lowest; c <= highest; ++c) {
    if (!bits_[c]) continue;
    unsigned end = c;
    while (end + 1 <= highest && bits_[end + 1]) ++end;
    if (!out.empty()) out += ',';
    out += std::to_string(c);
    if (end != c) out += '-' + std::to_string(end);
    c = end;
  }
  return out;
}

StatusMatcher default_expect_status() { return *StatusMatcher::parse("200-399"); }

}  // namespace sluice::health
