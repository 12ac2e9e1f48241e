#pragma once
// Byte classes of the HTTP grammar (RFC 9110, RFC 9112, RFC 3986), shared by the head scanner
// (strict.cpp) and the chunked decoder (chunked.cpp). Internal to src/http.
#include <array>
#include <cstdint>
#include <string_view>

namespace sluice::http::chars {

// Byte classes, one bit each, looked up in a 256-entry table: no locale, no branches per class.
constexpr std::uint8_t k_tchar = 1U << 0;     // RFC 9110 §5.6.2 token character
constexpr std::uint8_t k_vchar = 1U << 1;     // RFC 5234 VCHAR, %x21-7E
constexpr std::uint8_t k_field = 1U << 2;     // RFC 9110 §5.5: VCHAR / obs-text / SP / HTAB
constexpr std::uint8_t k_control = 1U << 3;   // C0 controls except HTAB (DEL is not in here)
constexpr std::uint8_t k_reg_name = 1U << 4;  // RFC 3986 §3.2.2 unreserved / sub-delims
constexpr std::uint8_t k_hex = 1U << 5;       // HEXDIG
constexpr std::uint8_t k_digit = 1U << 6;     // DIGIT

constexpr bool one_of(int c, std::string_view set) noexcept {
  return set.find(static_cast<char>(c)) != std::string_view::npos;
}

constexpr std::array<std::uint8_t, 256> make_classes() noexcept {
  std::array<std::uint8_t, 256> table{};
  for (int c = 0; c < 256; ++c) {
    const bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    const bool digit = c >= '0' && c <= '9';
    std::uint8_t k = 0;
    if (alpha || digit || one_of(c, "!#$%&'*+-.^_`|~")) k |= k_tchar;
    if (c >= 0x21 && c <= 0x7E) k |= k_vchar;
    if ((c >= 0x20 && c <= 0x7E) || c >= 0x80 || c == '\t') k |= k_field;
    if (c < 0x20 && c != '\t') k |= k_control;
    if (alpha || digit || one_of(c, "-._~!$&'()*+,;=")) k |= k_reg_name;
    if (digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) k |= k_hex;
    if (digit) k |= k_digit;
    table[static_cast<std::size_t>(c)] = k;
  }
  return table;
}

constexpr auto k_classes = make_classes();

constexpr bool is(unsigned char c, std::uint8_t k) noexcept { return (k_classes[c] & k) != 0; }
constexpr bool is(char c, std::uint8_t k) noexcept { return is(static_cast<unsigned char>(c), k); }
constexpr bool is_line_break(unsigned char c) noexcept { return c == '\r' || c == '\n'; }
constexpr bool is_ows(unsigned char c) noexcept { return c == ' ' || c == '\t'; }

}  // namespace sluice::http::chars
