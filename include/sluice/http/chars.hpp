#pragma once
// Byte classes of the HTTP grammar (RFC 9110, RFC 9112, RFC 3986), shared by the head scanner
// (strict.cpp) and the chunked decoder (chunked.cpp). Internal to src/http.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

// How many of the n bytes at p are field bytes (k_field) before the first that is not: the scan
// of a field value or a reason phrase, the head scanner's longest runs. 16 bytes at a time with
// SSE2 (every x86-64): a byte ends the run when it is at most 0x1F and not HTAB, or DEL - the
// complement of k_field, tested against the table for every byte value at every lane. The tail,
// and targets without SSE2, go byte by byte. 2,108 instructions per proxied request were the
// scanner's field lines before (bench/callgrind.sh), most of them these loops.
inline std::size_t field_run(const char* p, std::size_t n) noexcept {
  std::size_t i = 0;
#if defined(__SSE2__)
  const __m128i c1f = _mm_set1_epi8(0x1F);
  const __m128i tab = _mm_set1_epi8('\t');
  const __m128i del = _mm_set1_epi8(0x7F);
  for (; i + 16 <= n; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const __m128i low = _mm_cmpeq_epi8(_mm_min_epu8(v, c1f), v);  // v <= 0x1F, unsigned
    const __m128i stop = _mm_or_si128(_mm_andnot_si128(_mm_cmpeq_epi8(v, tab), low), _mm_cmpeq_epi8(v, del));
    if (const int m = _mm_movemask_epi8(stop)) return i + static_cast<std::size_t>(__builtin_ctz(static_cast<unsigned>(m)));
  }
#endif
  while (i < n && is(static_cast<unsigned char>(p[i]), k_field)) ++i;
  return i;
}

// How many of the n bytes at p are token characters (k_tchar) before the first that is not: a
// field name. Four bytes per step while four remain (one bound check for four lookups).
inline std::size_t token_run(const char* p, std::size_t n) noexcept {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    if (!is(u[i], k_tchar)) return i;
    if (!is(u[i + 1], k_tchar)) return i + 1;
    if (!is(u[i + 2], k_tchar)) return i + 2;
    if (!is(u[i + 3], k_tchar)) return i + 3;
  }
  while (i < n && is(u[i], k_tchar)) ++i;
  return i;
}

}  // namespace sluice::http::chars
