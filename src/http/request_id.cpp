#include "sluice/http/request_id.hpp"

#include <random>

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

std::string_view RequestIdGenerator::next(char (&out)[37]) noexcept {
  unsigned char bytes[16];
  const std::uint64_t words[2] = {next_u64(), next_u64()};
  for (int i = 0; i < 16; ++i) {
    bytes[i] = static_cast<unsigned char>(words[i / 8] >> (56 - 8 * (i % 8)));
  }
  // RFC 4122 §4.4: version 4 in the high nibble of octet 6, variant 10xx in octet 8.
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0F) | 0x40);
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3F) | 0x80);

  // RFC 4122 §3: 8-4-4-4-12 lowercase hex digits.
  static constexpr char digits[] = "0123456789abcdef";
  char* p = out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
    *p++ = digits[bytes[i] >> 4];
    *p++ = digits[bytes[i] & 0x0F];
  }
  *p = '\0';
  return {out, 36};
}

}  // namespace sluice::http
