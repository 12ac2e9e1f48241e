#include "sluice/core/clock.hpp"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(ManualClock, MovesOnlyWhenAdvanced) {
  ManualClock c;
  const auto t0 = c.now();
  EXPECT_EQ(c.now(), t0);
  c.advance(std::chrono::milliseconds(1500));
  EXPECT_EQ(c.now() - t0, std::chrono::milliseconds(1500));
}

TEST(SteadyClock, IsMonotonic) {
  const auto a = steady_clock().now();
  const auto b = steady_clock().now();
  EXPECT_LE(a, b);
}

}  // namespace
}  // namespace sluice
