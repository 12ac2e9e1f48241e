#include "sluice/balancer/weighted.hpp"

#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "test_pool.hpp"

namespace sluice {
namespace {

using balancer_test::counts;
using balancer_test::picks;
using balancer_test::TestPool;
using Seq = std::vector<std::uint32_t>;

// nginx's smooth weighted round robin as written there, mutating current weights on every pick:
// the reference the precomputed schedule must reproduce.
Seq nginx_swrr(const std::vector<std::uint32_t>& weights, std::size_t count) {
  std::vector<std::int64_t> current(weights.size(), 0);
  std::int64_t total = 0;
  for (auto w : weights) total += w;
  Seq out;
  for (std::size_t t = 0; t < count; ++t) {
    std::size_t best = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      current[i] += weights[i];
      if (current[i] > current[best]) best = i;
    }
    current[best] -= total;
    out.push_back(static_cast<std::uint32_t>(best));
  }
  return out;
}

TEST(Weighted, SmoothSequenceFiveOneOne) {
  TestPool p({5, 1, 1});
  WeightedRoundRobin w(p.span());
  // a a b a c a a, twice.
  EXPECT_EQ(picks(w, 14), (Seq{0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0}));
}

TEST(Weighted, MatchesNginxForRandomWeights) {
  std::mt19937 rng(42);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::uint32_t> weights(1 + rng() % 12);
    for (auto& x : weights) x = 1 + rng() % 20;
    TestPool p(weights);
    WeightedRoundRobin w(p.span());
    std::uint32_t total = 0;
    for (auto x : weights) total += x;
    EXPECT_EQ(picks(w, static_cast<int>(2 * total)), nginx_swrr(weights, 2 * total)) << round;
  }
}

TEST(Weighted, ExactProportionsOverEveryCycle) {
  const std::vector<std::uint32_t> weights{3, 7, 2, 9, 1};  // sum 22
  TestPool p(weights);
  WeightedRoundRobin w(p.span());
  EXPECT_EQ(w.schedule().size(), 22u);
  for (int cycle = 0; cycle < 5; ++cycle) {
    const auto c = counts(picks(w, 22), p.size());
    for (std::size_t i = 0; i < weights.size(); ++i) EXPECT_EQ(c[i], static_cast<int>(weights[i]));
  }
}

TEST(Weighted, AdaptsToWeightChange) {
  TestPool p({5, 1, 1});
  WeightedRoundRobin w(p.span());
  EXPECT_EQ(picks(w, 3), (Seq{0, 0, 1}));
  // The next pick sees the change and starts the new schedule from its beginning.
  p[0].set_weight(1);
  EXPECT_EQ(picks(w, 6), (Seq{0, 1, 2, 0, 1, 2}));
  p[1].set_weight(3);
  EXPECT_EQ(picks(w, 10), nginx_swrr({1, 3, 1}, 10));
  EXPECT_EQ(w.schedule(), nginx_swrr({1, 3, 1}, 5));
}

// Each worker walks the shared schedule with its own cursor (no cache line written by every
// worker on every request): its sequence is nginx's whatever the others do, worker w starting
// w slots in; after a weight change each worker starts the new schedule from its own offset.
TEST(Weighted, EachWorkerWalksTheScheduleOnItsOwn) {
  TestPool p({5, 1, 1});
  WeightedRoundRobin w(p.span(), 2);
  PickContext first;
  PickContext second;
  second.worker = 1;
  Seq a, b;
  for (int i = 0; i < 14; ++i) {
    a.push_back(w.pick(first).index);
    if (i % 2 == 0) b.push_back(w.pick(second).index);
  }
  EXPECT_EQ(a, nginx_swrr({5, 1, 1}, 14));
  EXPECT_EQ(b, (Seq{0, 1, 0, 2, 0, 0, 0}));  // a a b a c a a from its second slot
  p[0].set_weight(1);
  EXPECT_EQ(picks(w, 3, first), (Seq{0, 1, 2}));
  EXPECT_EQ(picks(w, 3, second), (Seq{1, 2, 0}));
}

TEST(Weighted, LargePoolSeesWeightChangeWithinAWindowRotation) {
  TestPool p(20);
  WeightedRoundRobin w(p.span());
  ASSERT_EQ(w.schedule().size(), 20u);
  p[19].set_weight(11);
  // 20 servers = 3 windows of 8: every server's weight is compared within 3 picks.
  picks(w, 3);
  const auto schedule = w.schedule();
  ASSERT_EQ(schedule.size(), 30u);
  EXPECT_EQ(counts(schedule, p.size())[19], 11);
  EXPECT_EQ(counts(picks(w, 300), p.size())[19], 110);
}

TEST(Weighted, EqualWeightsNeedOneSlotEach) {
  TestPool p(100, 1000);  // the common divisor is taken out: 1 slot each
  WeightedRoundRobin w(p.span());
  EXPECT_EQ(w.schedule().size(), 100u);
}

TEST(Weighted, LargeWeightSumsAreScaledToTheCap) {
  std::vector<std::uint32_t> weights;
  for (int i = 0; i < 100; ++i) weights.push_back(i % 2 ? 999 : 1000);  // sum 99,950, 2 groups
  TestPool p(weights);
  WeightedRoundRobin w(p.span());
  const auto schedule = w.schedule();
  EXPECT_LE(schedule.size(), WeightedRoundRobin::max_schedule_length);
  EXPECT_GT(schedule.size(), 65000u);
  const auto c = counts(schedule, p.size());
  for (std::size_t i = 0; i < p.size(); ++i)
    EXPECT_NEAR(c[i], weights[i] * 65536.0 / 99950.0, 1.0) << i;
}

TEST(Weighted, ManyDistinctWeightsGetAShorterSchedule) {
  std::vector<std::uint32_t> weights;
  for (std::uint32_t i = 0; i < 100; ++i) weights.push_back(1 + 10 * i);  // 100 groups, sum 49,600
  TestPool p(weights);
  WeightedRoundRobin w(p.span());
  const auto schedule = w.schedule();
  // Cap 2^21 / 100 groups = 20,971 slots: weights scaled by ~0.42, each within a slot.
  EXPECT_LE(schedule.size(), 20971u);
  const auto c = counts(schedule, p.size());
  for (std::size_t i = 0; i < p.size(); ++i)
    EXPECT_NEAR(c[i], weights[i] * 20971.0 / 49600.0, 1.0) << i;
}

TEST(Weighted, SlowStartShareScalesTheWeight) {
  TestPool p({5, 1, 1});
  WeightedRoundRobin w(p.span());
  EXPECT_EQ(picks(w, 7), nginx_swrr({5, 1, 1}, 7));
  // Ramping after recovery: a at half share = effective 2.5 against 1 and 1, i.e. 5,2,2.
  p[0].set_weight_share(500);
  EXPECT_EQ(picks(w, 18), nginx_swrr({5, 2, 2}, 18));
  // An odd share: thousandths 1185,1000,1000, common divisor 5.
  p[0].set_weight_share(237);
  EXPECT_EQ(picks(w, 637), nginx_swrr({237, 200, 200}, 637));
  EXPECT_EQ(counts(w.schedule(), p.size()), (std::vector<int>{237, 200, 200}));
  p[0].set_weight_share(Endpoint::full_weight_share);
  EXPECT_EQ(picks(w, 7), nginx_swrr({5, 1, 1}, 7));
}

TEST(Weighted, ScaledScheduleKeepsEveryServer) {
  std::vector<std::uint32_t> weights(200, 1000);
  weights[7] = 1;  // would scale to 0 slots
  TestPool p(weights);
  WeightedRoundRobin w(p.span());
  const auto c = counts(w.schedule(), p.size());
  EXPECT_EQ(c[7], 1);
  EXPECT_GT(c[0], 100);
}

TEST(Weighted, SkippedServerTurnsGoToTheOthersEvenly) {
  TestPool p({5, 1, 1});
  WeightedRoundRobin w(p.span());
  p[0].set_state(ServerState::down);
  EXPECT_EQ(picks(w, 6), (Seq{1, 2, 1, 2, 1, 2}));
  p[0].set_state(ServerState::up);
  p[2].set_draining(true);
  const auto c = counts(picks(w, 60), p.size());
  EXPECT_EQ(c[2], 0);
  EXPECT_NEAR(c[0], 50, 2);
  EXPECT_NEAR(c[1], 10, 2);
}

TEST(Weighted, TriedServersYieldFallbacksThenNothing) {
  TestPool p({5, 1, 1});
  WeightedRoundRobin w(p.span());
  TriedSet tried;
  const PickContext ctx{&tried};
  // First choice a; a tried: the next one in the schedule (b); then c; then nothing.
  EXPECT_EQ(w.pick(ctx).index, 0u);
  tried.add(0);
  EXPECT_EQ(w.pick(ctx).index, 1u);
  tried.add(1);
  EXPECT_EQ(w.pick(ctx).index, 2u);
  tried.add(2);
  EXPECT_FALSE(w.pick(ctx));
}

TEST(Weighted, SkipsServersAtMaxConns) {
  TestPool p({2, 1});
  WeightedRoundRobin w(p.span());
  p[0].set_max_conns(2);
  p[0].begin_request();
  p[0].begin_request();
  EXPECT_EQ(picks(w, 3), (Seq{1, 1, 1}));
  p[0].end_request();
  EXPECT_EQ(w.pick({}).index, 0u);
}

TEST(Weighted, FindsTheLastServerLeftInALargePool) {
  TestPool p(300, 1000);
  WeightedRoundRobin w(p.span());
  for (std::size_t i = 0; i < p.size(); ++i)
    if (i != 123) p[i].set_state(ServerState::down);
  EXPECT_EQ(picks(w, 3), (Seq{123, 123, 123}));
  p[123].set_state(ServerState::down);
  EXPECT_FALSE(w.pick({}));
}

TEST(Weighted, EmptyUpstreamPicksNothing) {
  WeightedRoundRobin w(std::span<Endpoint* const>{});
  EXPECT_FALSE(w.pick({}));
  EXPECT_TRUE(w.schedule().empty());
}

TEST(WeightedConcurrency, ExactProportionsAcrossThreads) {
  TestPool p({5, 1, 1});
  WeightedRoundRobin w(p.span());
  // 2 workers x 7,000 picks = 1,000 whole cycles each: exact whatever the interleaving.
  const auto hits = balancer_test::pick_concurrently(w, p, 2, 7000, balancer_test::no_key);
  EXPECT_EQ(hits, (std::vector<long>{10000, 2000, 2000, 0}));
}

TEST(WeightedConcurrency, WeightChangesWhilePicking) {
  TestPool p(12, 3);
  WeightedRoundRobin w(p.span());
  std::atomic<bool> done{false};
  std::thread control([&] {
    for (std::uint32_t k = 0; !done.load(std::memory_order_relaxed); ++k) {
      p[k % 12].set_weight(1 + k % 50);
      p[(k + 5) % 12].set_weight_share(100 + k % 901);  // slow-start ramps
      std::this_thread::yield();
    }
  });
  const auto hits = balancer_test::pick_concurrently(w, p, 2, 20000, balancer_test::no_key);
  done = true;
  control.join();
  EXPECT_EQ(hits.back(), 0);  // never nothing, never out of range
  long total = 0;
  for (std::size_t i = 0; i < p.size(); ++i) total += hits[i];
  EXPECT_EQ(total, 40000);
}

}  // namespace
}  // namespace sluice
