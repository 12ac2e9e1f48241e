#pragma once
// X-Request-Id generation: random version-4 UUIDs in their canonical 36-character text form.
// One generator per worker (not thread-safe; no locks, no allocation). Seeded from the OS at
// start, or with a fixed seed in tests.
#include <cstdint>
#include <string_view>

namespace sluice::http {

class RequestIdGenerator {
public:
  RequestIdGenerator();                        // seeded from std::random_device
  explicit RequestIdGenerator(std::uint64_t seed);

  // Writes 36 chars + NUL into out and returns a view of the 36 chars.
  std::string_view next(char (&out)[37]) noexcept;

private:
  std::uint64_t next_u64() noexcept;  // xoshiro256**
  std::uint64_t s_[4];
};

}  // namespace sluice::http
