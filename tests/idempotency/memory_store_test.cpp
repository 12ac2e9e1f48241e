#include "sluice/idempotency/memory_store.hpp"

#include <gtest/gtest.h>

namespace sluice::idempotency {
namespace {

using namespace std::chrono_literals;

TEST(MemoryStore, SetIfAbsentClaimsOnceThenReturnsTheValue) {
  ManualClock clock;
  MemoryStore store(clock, 1 << 20);
  EXPECT_FALSE(store.set_if_absent_now("k", "first", 10s));
  EXPECT_EQ(store.set_if_absent_now("k", "second", 10s), "first");
  EXPECT_EQ(store.get_now("k"), "first");
}

TEST(MemoryStore, AnEntryExpiresAtTheEndOfItsWindow) {
  ManualClock clock;
  MemoryStore store(clock, 1 << 20);
  store.put_now("k", "answer", 24h);
  clock.advance(24h - 1ms);
  EXPECT_EQ(store.get_now("k"), "answer");
  clock.advance(1ms);
  EXPECT_FALSE(store.get_now("k"));
  EXPECT_FALSE(store.set_if_absent_now("k", "again", 1s)) << "an expired key is claimed anew";
  EXPECT_EQ(store.stats().entries, 1u);
  EXPECT_EQ(store.stats().evictions, 0u) << "expiry is no eviction";
}

TEST(MemoryStore, RemoveIfDeletesOnlyTheHoldersClaim) {
  ManualClock clock;
  MemoryStore store(clock, 1 << 20);
  store.put_now("k", "claim-a", 10s);
  store.remove_if_now("k", "claim-b");
  EXPECT_EQ(store.get_now("k"), "claim-a");
  store.remove_if_now("k", "claim-a");
  EXPECT_FALSE(store.get_now("k"));
  EXPECT_EQ(store.stats().bytes, 0u);
}

TEST(MemoryStore, StaysWithinItsByteLimitEvictingTheOldest) {
  ManualClock clock;
  constexpr std::uint64_t limit = 64 * 1024;
  MemoryStore store(clock, limit);
  const std::string value(100, 'v');
  for (int i = 0; i < 10'000; ++i) {
    store.put_now("key-" + std::to_string(i), value, 1h);
    ASSERT_LE(store.stats().bytes, limit);
  }
  const auto per_entry = MemoryStore::entry_overhead + value.size() + 8;
  const auto stats = store.stats();
  EXPECT_GE(stats.entries, limit / per_entry - 1);
  EXPECT_EQ(stats.entries + stats.evictions, 10'000u);
  EXPECT_FALSE(store.get_now("key-0")) << "the oldest went first";
  EXPECT_TRUE(store.get_now("key-9999")) << "the newest stays";
}

TEST(MemoryStore, ALowerLimitEvictsAtOnce) {
  ManualClock clock;
  MemoryStore store(clock, 1 << 20);
  for (int i = 0; i < 100; ++i) store.put_now("key-" + std::to_string(i), "v", 1h);
  store.set_limit(MemoryStore::entry_overhead * 10);
  EXPECT_LE(store.stats().bytes, MemoryStore::entry_overhead * 10);
  EXPECT_TRUE(store.get_now("key-99"));
}

}  // namespace
}  // namespace sluice::idempotency
