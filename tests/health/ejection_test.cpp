#include "sluice/health/ejection.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace sluice::health {
namespace {

using namespace std::chrono_literals;

const Clock::time_point t0{std::chrono::hours(1)};

TEST(HealthEjection, BackoffDoublesAndIsCapped) {
  std::vector<Clock::duration> got;
  for (unsigned level = 1; level <= 8; ++level) got.push_back(Ejection::backoff(10s, 300s, level));
  const std::vector<Clock::duration> want{10s, 20s, 40s, 80s, 160s, 300s, 300s, 300s};
  EXPECT_EQ(got, want);
  EXPECT_EQ(Ejection::backoff(10s, 300s, 1000), 300s);  // no overflow at absurd levels
  EXPECT_EQ(Ejection::backoff(10s, 10s, 3), 10s);        // cap = base: no back-off
  EXPECT_EQ(Ejection::backoff(30s, 10s, 1), 10s);        // cap below base wins
}

TEST(HealthEjection, EjectedThenHalfOpenAtExpiry) {
  Ejection e(10s, 300s);
  EXPECT_EQ(e.phase(), Ejection::Phase::serving);
  EXPECT_EQ(e.eject(t0), 10s);
  EXPECT_EQ(e.phase(), Ejection::Phase::ejected);
  EXPECT_EQ(e.until(), t0 + 10s);
  EXPECT_FALSE(e.expire(t0 + 9999ms));
  EXPECT_TRUE(e.expire(t0 + 10s));
  EXPECT_EQ(e.phase(), Ejection::Phase::half_open);
  EXPECT_FALSE(e.expire(t0 + 11s));  // only once
  e.recover();
  EXPECT_EQ(e.phase(), Ejection::Phase::serving);
}

TEST(HealthEjection, FailedTrialsDoubleUpToTheCap) {
  Ejection e(10s, 300s);
  auto now = t0;
  std::vector<Clock::duration> got;
  for (int i = 0; i < 8; ++i) {
    got.push_back(e.eject(now));
    now = e.until();
    ASSERT_TRUE(e.expire(now));
  }
  const std::vector<Clock::duration> want{10s, 20s, 40s, 80s, 160s, 300s, 300s, 300s};
  EXPECT_EQ(got, want);
  EXPECT_EQ(e.level(), 8u);
  EXPECT_EQ(e.ejections(), 8u);
}

TEST(HealthEjection, QuickRelapseAfterRecoveryKeepsBackingOff) {
  Ejection e(10s, 300s);
  e.eject(t0);
  e.expire(t0 + 10s);
  e.recover();
  EXPECT_EQ(e.next_duration(t0 + 70s), 20s);
  EXPECT_EQ(e.eject(t0 + 70s), 20s);
  EXPECT_EQ(e.level(), 2u);
}

TEST(HealthEjection, LevelResetsAfterMaxEjectionTimeBackInService) {
  Ejection e(10s, 300s);
  e.eject(t0);
  e.expire(t0 + 10s);
  e.recover();
  EXPECT_EQ(e.next_duration(t0 + 10s + 299s), 20s);
  EXPECT_EQ(e.next_duration(t0 + 10s + 300s), 10s);
  EXPECT_EQ(e.eject(t0 + 10s + 300s), 10s);
  EXPECT_EQ(e.level(), 1u);
}

TEST(HealthEjection, ALongHalfOpenDoesNotCountAsRest) {
  Ejection e(10s, 300s);
  e.eject(t0);
  e.expire(t0 + 10s);
  // Still on trial an hour later (no traffic, no probes): the trial failing is a relapse.
  EXPECT_EQ(e.eject(t0 + 1h), 20s);
}

}  // namespace
}  // namespace sluice::health
