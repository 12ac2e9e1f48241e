#include "sluice/http/request_id.hpp"

#include <bit>
#include <cstring>
#include <random>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "sluice/core/random.hpp"

namespace sluice::http {

namespace {

// splitmix64 spreads one 64-bit seed over xoshiro's 256-bit state, as xoshiro's authors
// recommend; a state of all zeros, xoshiro's only bad state, cannot come out of it.

constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }

std::uint64_t os_seed() {
  // random_device yields 32 bits per call on common implementations.
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

}  // namespace

RequestIdGenerator::RequestIdGenerator() : RequestIdGenerator(os_seed()) {}

RequestIdGenerator::RequestIdGenerator(std::uint64_t seed) {
  for (auto& word : s_) word = splitmix64(seed);
}

// xoshiro256** 1.0 (Blackman, Vigna), the reference algorithm step for step.
std::uint64_t RequestIdGenerator::next_u64() noexcept {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

namespace {

// The 32 lowercase hex digits of `bytes`, most significant nibble first. With SSE2 (every
// x86-64) 16 nibbles at a time: a digit is the nibble + '0', + 39 more from 10 up ('a' - '0' -
// 10). The byte loop it replaces was most of the 219 instructions an ID cost (bench/callgrind.sh).
void hex32(const unsigned char (&bytes)[16], char (&hex)[32]) noexcept {
#if defined(__SSE2__)
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
  const __m128i low_nibbles = _mm_set1_epi8(0x0F);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), low_nibbles);
  const __m128i lo = _mm_and_si128(v, low_nibbles);
  const auto digits = [](__m128i n) {
    const __m128i letters = _mm_and_si128(_mm_cmpgt_epi8(n, _mm_set1_epi8(9)), _mm_set1_epi8('a' - '0' - 10));
    return _mm_add_epi8(_mm_add_epi8(n, _mm_set1_epi8('0')), letters);
  };
  _mm_storeu_si128(reinterpret_cast<__m128i*>(hex), digits(_mm_unpacklo_epi8(hi, lo)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(hex + 16), digits(_mm_unpackhi_epi8(hi, lo)));
#else
  static constexpr char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    hex[2 * i] = digits[bytes[i] >> 4];
    hex[2 * i + 1] = digits[bytes[i] & 0x0F];
  }
#endif
}

}  // namespace

std::string_view RequestIdGenerator::next(char (&out)[37]) noexcept {
  // The two words' bytes, most significant first: stored big-endian (a byte swap each on x86,
  // not a loop of shifts).
  const auto big_endian = [](std::uint64_t w) {
    if constexpr (std::endian::native == std::endian::little) return __builtin_bswap64(w);
    return w;
  };
  unsigned char bytes[16];
  const std::uint64_t words[2] = {big_endian(next_u64()), big_endian(next_u64())};
  std::memcpy(bytes, words, sizeof bytes);
  // RFC 4122 §4.4: version 4 in the high nibble of octet 6, variant 10xx in octet 8.
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0F) | 0x40);
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3F) | 0x80);

  // RFC 4122 §3: 8-4-4-4-12 lowercase hex digits.
  char hex[32];
  hex32(bytes, hex);
  std::memcpy(out, hex, 8);
  out[8] = '-';
  std::memcpy(out + 9, hex + 8, 4);
  out[13] = '-';
  std::memcpy(out + 14, hex + 12, 4);
  out[18] = '-';
  std::memcpy(out + 19, hex + 16, 4);
  out[23] = '-';
  std::memcpy(out + 24, hex + 20, 12);
  out[36] = '\0';
  return {out, 36};
}

}  // namespace sluice::http
