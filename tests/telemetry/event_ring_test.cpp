// The events ring: sequence numbers, since(after), the capacity bound, and pushes from several
// threads (workers record passive health transitions while the control thread reads).
#include "sluice/telemetry/event_ring.hpp"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace sluice::telemetry {
namespace {

const Clock::time_point t0{std::chrono::hours(1)};

TEST(EventRing, NumbersEventsAndReturnsThoseAfterASeq) {
  EventRing ring(10);
  EXPECT_EQ(ring.last_seq(), 0U);
  EXPECT_EQ(ring.push("health", "app", "app-1", "up -> down: timeout", t0), 1U);
  EXPECT_EQ(ring.push("drain", "app", "app-2", "draining", t0), 2U);
  EXPECT_EQ(ring.push("reload", "", "", "version 2", t0), 3U);
  const auto all = ring.since(0);
  ASSERT_EQ(all.size(), 3U);
  EXPECT_EQ(all[0].kind, "health");
  EXPECT_EQ(all[0].server, "app-1");
  EXPECT_EQ(all[0].text, "up -> down: timeout");
  EXPECT_EQ(all[2].seq, 3U);
  const auto fresh = ring.since(2);
  ASSERT_EQ(fresh.size(), 1U);
  EXPECT_EQ(fresh[0].kind, "reload");
  EXPECT_TRUE(ring.since(3).empty());
}

TEST(EventRing, KeepsOnlyTheLastCapacityEvents) {
  EventRing ring(50);
  for (int i = 1; i <= 120; ++i) ring.push("health", "app", "s", std::to_string(i), t0);
  const auto kept = ring.since(0);
  ASSERT_EQ(kept.size(), 50U);
  EXPECT_EQ(kept.front().seq, 71U);
  EXPECT_EQ(kept.front().text, "71");
  EXPECT_EQ(kept.back().seq, 120U);
  EXPECT_EQ(ring.last_seq(), 120U);
  // A poller far behind gets what is left, not an error.
  EXPECT_EQ(ring.since(5).size(), 50U);
}

TEST(EventRing, ConcurrentPushesGetDistinctSeqs) {
  EventRing ring(1000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&ring] {
      for (int i = 0; i < 200; ++i) ring.push("health", "app", "s", "x", t0);
    });
  for (auto& t : threads) t.join();
  const auto all = ring.since(0);
  ASSERT_EQ(all.size(), 800U);
  std::set<std::uint64_t> seqs;
  for (std::size_t i = 0; i < all.size(); ++i) {
    seqs.insert(all[i].seq);
    if (i > 0) EXPECT_LT(all[i - 1].seq, all[i].seq);
  }
  EXPECT_EQ(seqs.size(), 800U);
}

TEST(EventRing, ZeroCapacityIsRefused) { EXPECT_THROW(EventRing(0), std::invalid_argument); }

}  // namespace
}  // namespace sluice::telemetry
