#pragma once
// Small, fast, seedable randomness for jitter, ids and sampling: SplitMix64 (Steele, Lea, Flood
// 2014). Deterministic across standard libraries (unlike <random>'s distributions), so a seed
// gives the same sequence everywhere. Not for secrets.
#include <cstdint>

namespace sluice {

// Advances `state` and returns the next 64 random bits.
inline std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The top 53 bits as a double, uniform in [0, 1).
inline double unit_interval(std::uint64_t bits) noexcept {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace sluice
