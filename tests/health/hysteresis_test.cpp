#include "sluice/health/hysteresis.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sluice::health {
namespace {

// Feeds "p"/"f" results; returns the verdict after each one as "U"/"D".
std::string run(Hysteresis& h, const std::string& results) {
  std::string verdicts;
  for (const char c : results) {
    h.record(c == 'p');
    verdicts += h.up() ? 'U' : 'D';
  }
  return verdicts;
}

TEST(HealthHysteresis, GoesDownAfterFallConsecutiveFailures) {
  Hysteresis h(2, 3, true);
  EXPECT_EQ(h.counter(), 4u);  // rise + fall - 1: fully up
  EXPECT_FALSE(h.record(false));
  EXPECT_EQ(h.counter(), 3u);
  EXPECT_FALSE(h.record(false));
  EXPECT_EQ(h.counter(), 2u);
  EXPECT_TRUE(h.record(false));  // below rise: fully down
  EXPECT_FALSE(h.up());
  EXPECT_EQ(h.counter(), 0u);
  EXPECT_EQ(h.consecutive_failures(), 3u);
}

TEST(HealthHysteresis, ComesUpAfterRiseConsecutivePasses) {
  Hysteresis h(2, 3, false);
  EXPECT_EQ(h.counter(), 0u);
  EXPECT_FALSE(h.record(true));
  EXPECT_EQ(h.counter(), 1u);
  EXPECT_TRUE(h.record(true));
  EXPECT_TRUE(h.up());
  EXPECT_EQ(h.counter(), 4u);  // fully up at once: the next `fall` failures are needed
  EXPECT_EQ(h.consecutive_passes(), 2u);
}

TEST(HealthHysteresis, APassInBetweenRefillsTheCounter) {
  Hysteresis h(2, 3, true);
  EXPECT_EQ(run(h, "ffpff"), "UUUUU");
  EXPECT_EQ(h.counter(), 2u);
  EXPECT_EQ(run(h, "f"), "D");
}

TEST(HealthHysteresis, AFailureInBetweenEmptiesTheCounter) {
  Hysteresis h(3, 2, false);
  EXPECT_EQ(run(h, "ppfpp"), "DDDDD");
  EXPECT_EQ(h.counter(), 2u);
  EXPECT_EQ(run(h, "p"), "U");
}

TEST(HealthHysteresis, FailingEveryOtherProbeNeverChangesState) {
  for (const bool initially_up : {true, false}) {
    Hysteresis h(2, 3, initially_up);
    for (int i = 0; i < 100; ++i) {
      EXPECT_FALSE(h.record(i % 2 == 0));
      EXPECT_EQ(h.up(), initially_up);
    }
  }
}

TEST(HealthHysteresis, ExactSequence) {
  Hysteresis h(2, 3, true);
  EXPECT_EQ(run(h, "fff" "p" "p" "ff" "p" "fff" "pfpfp" "p"),
                   "UUD" "D" "U" "UU" "U" "UUD" "DDDDD" "U");
}

TEST(HealthHysteresis, RiseAndFallOfOneFollowEveryResult) {
  Hysteresis h(1, 1, true);
  EXPECT_EQ(h.max(), 1u);
  EXPECT_EQ(run(h, "fpfpp"), "DUDUU");
}

TEST(HealthHysteresis, ZeroIsReadAsOne) {
  Hysteresis h(0, 0, true);
  EXPECT_EQ(h.rise(), 1u);
  EXPECT_EQ(h.fall(), 1u);
  EXPECT_TRUE(h.record(false));
}

TEST(HealthHysteresis, CounterStaysInRange) {
  Hysteresis h(3, 4, false);
  for (int i = 0; i < 20; ++i) h.record(true);
  EXPECT_EQ(h.counter(), 6u);
  EXPECT_EQ(h.consecutive_passes(), 20u);
  for (int i = 0; i < 20; ++i) h.record(false);
  EXPECT_EQ(h.counter(), 0u);
  EXPECT_EQ(h.consecutive_passes(), 0u);
  EXPECT_EQ(h.consecutive_failures(), 20u);
}

}  // namespace
}  // namespace sluice::health
