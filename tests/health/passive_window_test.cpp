#include "sluice/health/passive_window.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace sluice::health {
namespace {

using namespace std::chrono_literals;

const Clock::time_point t0{std::chrono::hours(1)};

TEST(HealthPassiveWindow, ThreeFailuresInTenSecondsFillIt) {
  PassiveWindow w(3, 10s);
  EXPECT_FALSE(w.record(t0));
  EXPECT_FALSE(w.record(t0 + 5s));
  EXPECT_TRUE(w.record(t0 + 10s));  // the span is inclusive: exactly 10 s counts
}

TEST(HealthPassiveWindow, ThreeFailuresSpreadOverElevenSecondsDoNot) {
  PassiveWindow w(3, 10s);
  EXPECT_FALSE(w.record(t0));
  EXPECT_FALSE(w.record(t0 + 5500ms));
  EXPECT_FALSE(w.record(t0 + 11s));
  EXPECT_EQ(w.count(t0 + 11s), 2u);
  // The window slides: the last three now span 5.5 s .. 15 s.
  EXPECT_TRUE(w.record(t0 + 15s));
}

TEST(HealthPassiveWindow, SlowTrickleNeverFillsIt) {
  PassiveWindow w(3, 10s);
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(w.record(t0 + i * 5001ms));
}

TEST(HealthPassiveWindow, MemoryIsBoundedByMaxFails) {
  PassiveWindow w(5, 10s);
  for (int i = 0; i < 100000; ++i) w.record(t0 + i * 1ms);
  EXPECT_EQ(w.max_fails(), 5u);
  EXPECT_EQ(w.count(t0 + 100s), 5u);
}

TEST(HealthPassiveWindow, CountForgetsOldFailures) {
  PassiveWindow w(5, 10s);
  w.record(t0);
  w.record(t0 + 4s);
  w.record(t0 + 8s);
  EXPECT_EQ(w.count(t0 + 8s), 3u);
  EXPECT_EQ(w.count(t0 + 12s), 2u);
  EXPECT_EQ(w.count(t0 + 17s), 1u);
  EXPECT_EQ(w.count(t0 + 19s), 0u);
}

TEST(HealthPassiveWindow, ClearStartsOver) {
  PassiveWindow w(2, 10s);
  EXPECT_FALSE(w.record(t0));
  w.clear();
  EXPECT_FALSE(w.record(t0 + 1s));
  EXPECT_TRUE(w.record(t0 + 2s));
}

TEST(HealthPassiveWindow, MaxFailsOneAndZero) {
  PassiveWindow one(1, 10s);
  EXPECT_TRUE(one.record(t0));
  EXPECT_TRUE(one.record(t0 + 1h));
  PassiveWindow off(0, 10s);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(off.record(t0));
  EXPECT_EQ(off.count(t0), 0u);
}

}  // namespace
}  // namespace sluice::health
