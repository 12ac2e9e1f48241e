#include "sluice/health/ejection_guard.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace sluice::health {
namespace {

// How many of `pool` servers get ejected if every one of them asks.
unsigned ejectable(std::uint32_t pool, std::uint32_t percent) {
  EjectionGuard guard(pool, percent);
  unsigned allowed = 0;
  for (std::uint32_t i = 0; i < pool; ++i) allowed += guard.try_eject().allowed ? 1 : 0;
  EXPECT_EQ(guard.refusals(), pool - allowed);
  EXPECT_EQ(guard.ejected(), allowed);
  return allowed;
}

TEST(HealthEjectionGuard, FiftyPercentOfPoolsOfOneTwoThreeAndTen) {
  EXPECT_EQ(ejectable(1, 50), 0u);  // 1/1 = 100 % > 50 %: a lone server is never ejected
  EXPECT_EQ(ejectable(2, 50), 1u);  // 1/2 = 50 %: allowed (the limit is inclusive)
  EXPECT_EQ(ejectable(3, 50), 1u);  // 2/3 = 67 %: refused
  EXPECT_EQ(ejectable(10, 50), 5u);
}

TEST(HealthEjectionGuard, OtherPercentages) {
  EXPECT_EQ(ejectable(1, 100), 1u);
  EXPECT_EQ(ejectable(3, 100), 3u);
  EXPECT_EQ(ejectable(10, 0), 0u);
  EXPECT_EQ(ejectable(3, 34), 1u);
  EXPECT_EQ(ejectable(3, 66), 1u);
  EXPECT_EQ(ejectable(3, 67), 2u);
  EXPECT_EQ(ejectable(10, 10), 1u);
  EXPECT_EQ(ejectable(0, 100), 0u);
  EXPECT_EQ(ejectable(2, 250), 2u);  // clamped to 100
}

TEST(HealthEjectionGuard, VerdictSaysWhy) {
  EjectionGuard guard(3, 50);
  const auto first = guard.try_eject();
  EXPECT_TRUE(first.allowed);
  EXPECT_EQ(first.ejected_after, 1u);
  const auto second = guard.try_eject();
  EXPECT_FALSE(second.allowed);
  EXPECT_EQ(second.ejected_after, 2u);
  EXPECT_EQ(second.pool_size, 3u);
  EXPECT_EQ(second.max_percent, 50u);
  EXPECT_EQ(guard.refusals(), 1u);
}

TEST(HealthEjectionGuard, ReleaseFreesASlot) {
  EjectionGuard guard(2, 50);
  EXPECT_TRUE(guard.try_eject().allowed);
  EXPECT_FALSE(guard.try_eject().allowed);
  guard.release();
  EXPECT_TRUE(guard.try_eject().allowed);
  guard.release();
  guard.release();  // never below zero
  EXPECT_EQ(guard.ejected(), 0u);
}

TEST(HealthEjectionGuard, ReconfigureKeepsEjectionsInPlace) {
  EjectionGuard guard(10, 50);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(guard.try_eject().allowed);
  guard.reconfigure(4, 50);  // the pool shrank: capacity 2, but 5 are out already
  EXPECT_EQ(guard.ejected(), 5u);
  EXPECT_FALSE(guard.try_eject().allowed);
  for (int i = 0; i < 4; ++i) guard.release();
  EXPECT_TRUE(guard.try_eject().allowed);  // 2 of 4
  EXPECT_FALSE(guard.try_eject().allowed);
}

TEST(HealthEjectionGuard, ConcurrentEjectionsNeverExceedTheLimit) {
  EjectionGuard guard(10, 50);
  std::atomic<unsigned> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        if (guard.try_eject().allowed) {
          allowed.fetch_add(1);
          EXPECT_LE(guard.ejected(), 5u);
          guard.release();
          allowed.fetch_sub(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(guard.ejected(), 0u);
  EXPECT_EQ(allowed.load(), 0u);
}

}  // namespace
}  // namespace sluice::health
