#pragma once
// The few byte rules the compress module's field readers share (RFC 9110 §5.6.2 tokens, ASCII
// case folding). Internal to src/compress.
#include <algorithm>
#include <string_view>

namespace sluice::compress::ascii {

inline bool is_tchar(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

inline char lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// `a` equals `lowercase` (already lower case) ignoring the case of `a`.
inline bool iequals(std::string_view a, std::string_view lowercase) noexcept {
  return a.size() == lowercase.size() && std::equal(a.begin(), a.end(), lowercase.begin(),
                                                    [](char x, char y) { return lower(x) == y; });
}

inline bool is_ows(char c) noexcept { return c == ' ' || c == '\t'; }

}  // namespace sluice::compress::ascii
