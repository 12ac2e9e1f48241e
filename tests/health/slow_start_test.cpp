#include "sluice/health/slow_start.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace sluice::health {
namespace {

using namespace std::chrono_literals;

const Clock::time_point t0{std::chrono::hours(1)};

TEST(HealthSlowStart, RampsLinearlyWithATenPercentFloor) {
  SlowStart s(30s);
  EXPECT_FALSE(s.active(t0));
  EXPECT_EQ(s.share(t0), 1000u);
  s.start(t0);
  EXPECT_TRUE(s.active(t0));
  EXPECT_EQ(s.share(t0), 100u);           // floor
  EXPECT_EQ(s.share(t0 + 1s), 100u);      // 3.3 % → floor
  EXPECT_EQ(s.share(t0 + 3s), 100u);      // 10 %
  EXPECT_EQ(s.share(t0 + 6s), 200u);
  EXPECT_EQ(s.share(t0 + 7500ms), 250u);
  EXPECT_EQ(s.share(t0 + 15s), 500u);
  EXPECT_EQ(s.share(t0 + 27s), 900u);
  EXPECT_EQ(s.share(t0 + 29970ms), 999u);
  EXPECT_TRUE(s.active(t0 + 29999ms));
  EXPECT_FALSE(s.active(t0 + 30s));
  EXPECT_EQ(s.share(t0 + 30s), 1000u);
  EXPECT_EQ(s.share(t0 + 1h), 1000u);
}

TEST(HealthSlowStart, EffectiveWeightOfAWeightThreeServer) {
  SlowStart s(10s);
  s.start(t0);
  // Endpoint::effective_weight_milli() = weight × share.
  EXPECT_EQ(3u * s.share(t0 + 5s), 1500u);
  EXPECT_EQ(3u * s.share(t0 + 10s), 3000u);
}

TEST(HealthSlowStart, RestartBeginsAgainAtTheFloor) {
  SlowStart s(10s);
  s.start(t0);
  EXPECT_EQ(s.share(t0 + 8s), 800u);
  s.start(t0 + 8s);
  EXPECT_EQ(s.share(t0 + 8s), 100u);
  EXPECT_EQ(s.share(t0 + 13s), 500u);
  s.stop();
  EXPECT_FALSE(s.active(t0 + 13s));
  EXPECT_EQ(s.share(t0 + 13s), 1000u);
}

TEST(HealthSlowStart, ZeroMeansOff) {
  SlowStart s(0s);
  s.start(t0);
  EXPECT_FALSE(s.active(t0));
  EXPECT_EQ(s.share(t0), 1000u);
}

TEST(HealthSlowStart, StepIsOnePercentButAtLeastTenMilliseconds) {
  EXPECT_EQ(SlowStart(30s).step(), 300ms);
  EXPECT_EQ(SlowStart(500ms).step(), 10ms);
}

}  // namespace
}  // namespace sluice::health
