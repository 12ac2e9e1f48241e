#include "sluice/proxy/rate_limit.hpp"

#include <gtest/gtest.h>

#include "sluice/balancer/hash.hpp"
#include "sluice/core/random.hpp"

namespace sluice::proxy {
namespace {

using namespace std::chrono_literals;

RateLimiter::Settings per_second(std::uint32_t rate, std::uint32_t burst, std::size_t keys = 1024) {
  RateLimiter::Settings s;
  s.interval = std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(1)) / rate;
  s.burst = burst;
  s.max_keys = keys;
  return s;
}

std::uint64_t key(int n) { return hash_mix64(static_cast<std::uint64_t>(n)); }

TEST(RateLimiter, BurstPassesAtOnceThenOneTokenPerInterval) {
  ManualClock clock;
  RateLimiter limiter(per_second(10, 5));  // one token per 100 ms, 5 at once
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.take(key(1), clock.now()).allowed) << i;
  const auto refused = limiter.take(key(1), clock.now());
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after, 100ms);
  clock.advance(60ms);
  const auto still = limiter.take(key(1), clock.now());
  EXPECT_FALSE(still.allowed);
  EXPECT_EQ(still.retry_after, 40ms);
  clock.advance(40ms);
  EXPECT_TRUE(limiter.take(key(1), clock.now()).allowed);
  EXPECT_FALSE(limiter.take(key(1), clock.now()).allowed);
}

TEST(RateLimiter, OverAnyWindowAtMostBurstPlusRateTimesTimePass) {
  ManualClock clock;
  RateLimiter limiter(per_second(100, 20));
  int passed = 0;
  // 2 s of 1,000 requests/s from one key: 20 + 100 x 2 may pass, not one more.
  for (int i = 0; i < 2000; ++i) {
    passed += limiter.take(key(7), clock.now()).allowed ? 1 : 0;
    clock.advance(1ms);
  }
  EXPECT_LE(passed, 20 + 200);
  EXPECT_GE(passed, 20 + 199);
}

TEST(RateLimiter, KeysAreIndependentAndIdleBucketsRefill) {
  ManualClock clock;
  RateLimiter limiter(per_second(1, 2));
  EXPECT_TRUE(limiter.take(key(1), clock.now()).allowed);
  EXPECT_TRUE(limiter.take(key(1), clock.now()).allowed);
  EXPECT_FALSE(limiter.take(key(1), clock.now()).allowed);
  EXPECT_TRUE(limiter.take(key(2), clock.now()).allowed);  // another key is unaffected
  clock.advance(1h);                                         // a long idle time refills to burst, no more
  EXPECT_TRUE(limiter.take(key(1), clock.now()).allowed);
  EXPECT_TRUE(limiter.take(key(1), clock.now()).allowed);
  EXPECT_FALSE(limiter.take(key(1), clock.now()).allowed);
}

TEST(RateLimiter, MemoryIsBoundedAndTheLeastRecentKeyIsEvicted) {
  ManualClock clock;
  RateLimiter limiter(per_second(1, 1, 16 * RateLimiter::shard_count));
  EXPECT_EQ(limiter.capacity(), 16 * RateLimiter::shard_count);
  for (int i = 0; i < 100'000; ++i) limiter.take(key(i), clock.now());
  EXPECT_EQ(limiter.size(), limiter.capacity());
  // Key 99,999 was seen last: it is remembered (refused); key 0 was evicted long ago (a fresh,
  // full bucket again).
  EXPECT_FALSE(limiter.take(key(99'999), clock.now()).allowed);
  EXPECT_TRUE(limiter.take(key(0), clock.now()).allowed);
}

TEST(RateLimiter, RecentlySeenKeysSurviveEviction) {
  ManualClock clock;
  RateLimiter limiter(per_second(1, 1, 4 * RateLimiter::shard_count));
  EXPECT_TRUE(limiter.take(key(-1), clock.now()).allowed);  // an abusive key, now empty
  for (int i = 0; i < 10'000; ++i) {
    limiter.take(key(i), clock.now());
    // It keeps coming back: it stays the most recent in its shard and keeps its state.
    EXPECT_FALSE(limiter.take(key(-1), clock.now()).allowed) << i;
  }
  EXPECT_EQ(limiter.size(), limiter.capacity());
}

TEST(RateLimiter, TableStaysConsistentUnderChurn) {
  // Many more keys than slots, revisited at random: every lookup must still find what it stored
  // (the index's deletion keeps probe runs intact).
  ManualClock clock;
  RateLimiter limiter(per_second(1, 3, 64 * RateLimiter::shard_count));
  std::uint64_t state = 42;
  for (int i = 0; i < 200'000; ++i) {
    const int k = static_cast<int>(splitmix64(state) % 3000);
    limiter.take(key(k), clock.now());
  }
  EXPECT_EQ(limiter.size(), limiter.capacity());
  // A key just taken three times is empty whatever the churn before.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.take(key(5000), clock.now()).allowed);
  EXPECT_FALSE(limiter.take(key(5000), clock.now()).allowed);
}

}  // namespace
}  // namespace sluice::proxy
