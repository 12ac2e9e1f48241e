// Coding names, level defaults and the server's order of preference.
#include "sluice/compress/coding.hpp"

#include <algorithm>

namespace sluice::compress {

std::string_view token(Coding c) noexcept {
  switch (c) {
    case Coding::gzip:
      return "gzip";
    case Coding::zstd:
      return "zstd";
    case Coding::br:
      return "br";
    case Coding::identity:
      break;
  }
  return "identity";
}

int Levels::of(Coding c) const noexcept {
  switch (c) {
    case Coding::gzip:
      return gzip;
    case Coding::zstd:
      return zstd;
    case Coding::br:
      return br;
    case Coding::identity:
      break;
  }
  return 0;
}

LevelRange level_range(Coding c) noexcept {
  switch (c) {
    case Coding::gzip:
      return {1, 9};
    case Coding::zstd:
      return {1, 19};  // 20..22 need the "ultra" window sizes
    case Coding::br:
      return {0, 11};
    case Coding::identity:
      break;
  }
  return {0, 0};
}

// zstd first: at its default level it is the cheapest of the three per KiB and compresses about
// as well as gzip; br next (the best ratio, for a little more CPU); gzip last, for the clients
// that take nothing else.
Preference::Preference() noexcept : order_{Coding::zstd, Coding::br, Coding::gzip}, size_(3) {}

Preference::Preference(std::span<const Coding> order) noexcept {
  for (const auto c : order) {
    const auto used = order_.begin() + size_;
    if (c == Coding::identity || size_ == order_.size() ||
        std::find(order_.begin(), used, c) != used)
      continue;
    order_[size_++] = c;
  }
}

}  // namespace sluice::compress
