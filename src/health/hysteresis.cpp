#include "sluice/health/hysteresis.hpp"

#include <algorithm>
#include <limits>

namespace sluice::health {
namespace {

void bump(unsigned& streak) noexcept {
  if (streak != std::numeric_limits<unsigned>::max()) ++streak;
}

}  // namespace

Hysteresis::Hysteresis(unsigned rise, unsigned fall, bool initially_up) noexcept
    : rise_(std::max(rise, 1u)), fall_(std::max(fall, 1u)), counter_(initially_up ? max() : 0) {}

bool Hysteresis::record(bool passed) noexcept {
  const bool was_up = up();
  if (passed) {
    bump(passes_);
    failures_ = 0;
    if (counter_ < max()) ++counter_;
    if (counter_ >= rise_) counter_ = max();
  } else {
    bump(failures_);
    passes_ = 0;
    if (counter_ > 0) --counter_;
    if (counter_ < rise_) counter_ = 0;
  }
  return up() != was_up;
}

}  // namespace sluice::health
