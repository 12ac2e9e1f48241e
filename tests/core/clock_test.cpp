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

TEST(TurnTime, OneReadingForTheTurnAndTheClockAfterIt) {
  const SteadyClock clock;
  Clock::time_point in_turn;
  {
    const TurnTime turn;
    in_turn = clock.now();
    while (SteadyClock::read() == in_turn) {}
    EXPECT_EQ(clock.now(), in_turn);
    {
      const TurnTime inner;  // a nested turn reads the clock again...
      EXPECT_GT(clock.now(), in_turn);
    }
    EXPECT_EQ(clock.now(), in_turn);  // ...and gives the outer reading back
  }
  while (SteadyClock::read() == in_turn) {}
  EXPECT_GT(clock.now(), in_turn);
}

}  // namespace
}  // namespace sluice
