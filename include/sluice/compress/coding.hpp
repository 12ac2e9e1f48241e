#pragma once
// The content codings sluice can apply to a response (RFC 9110 §8.4.1), and their levels.
// Plain values: the config holds them, the negotiation and the encoders read them.
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace sluice::compress {

// identity: the body as the origin sent it. deflate is not offered: "deflate" has meant both a
// zlib stream and a raw one to different clients (RFC 9110 §8.4.1.2 notes the confusion), and
// every client that accepts it accepts gzip too.
enum class Coding : std::uint8_t { identity, gzip, zstd, br };

// The registered token ("gzip", "zstd", "br"); "identity" for identity.
std::string_view token(Coding c) noexcept;

// Levels for on-the-fly compression: every response pays them in CPU, so each default sits
// just below the level whose extra CPU buys little ratio (bench/results/compression.md has the
// cost per KiB and the ratio of each).
struct Levels {
  int gzip = 5;  // zlib 1..9; zlib's own default, 6, costs much more for a few percent
  int zstd = 3;  // zstd 1..19 (ZSTD_CLEVEL_DEFAULT); negative levels are not offered
  int br = 4;    // brotli quality 0..11; from 5 on brotli switches to its costlier hashers
  int of(Coding c) const noexcept;
};

// The levels each library takes (gzip 1..9, zstd 1..19, br 0..11); the config refuses others.
struct LevelRange {
  int min;
  int max;
};
LevelRange level_range(Coding c) noexcept;

// The codings a server offers, most preferred first (a subset of gzip, zstd, br, each at most
// once). Where the client weighs two codings the same, this order decides (accept_encoding.hpp).
class Preference {
public:
  // zstd, br, gzip: the default order (docs/compression.md says why).
  Preference() noexcept;
  // At most 3 codings, no identity, none twice; anything else is ignored (the config checks it).
  explicit Preference(std::span<const Coding> order) noexcept;
  std::span<const Coding> order() const noexcept { return {order_.data(), size_}; }

private:
  std::array<Coding, 3> order_{};
  std::uint8_t size_ = 0;
};

}  // namespace sluice::compress
