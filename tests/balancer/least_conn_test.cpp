#include "sluice/balancer/least_conn.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "test_pool.hpp"

namespace sluice {
namespace {

using balancer_test::counts;
using balancer_test::picks;
using balancer_test::TestPool;
using Seq = std::vector<std::uint32_t>;

void load(Endpoint& e, int requests) {
  for (int i = 0; i < requests; ++i) e.begin_request();
}

TEST(LeastConn, IdlePoolSpreadsRoundRobin) {
  TestPool p(3);
  LeastConn lc(p.span());
  EXPECT_EQ(picks(lc, 7), (Seq{0, 1, 2, 0, 1, 2, 0}));
}

TEST(LeastConn, TiesSpreadRoundRobin) {
  TestPool p(4);
  LeastConn lc(p.span());
  for (std::size_t i = 0; i < p.size(); ++i) load(p[i], 2);
  load(p[3], 1);  // s3 is heavier: never picked while the others tie
  EXPECT_EQ(picks(lc, 6), (Seq{0, 1, 2, 0, 1, 2}));
}

// Each worker spreads ties from its own cursor (worker w starting at server w), untouched by the
// other workers' picks: no cache line written by every worker on every request.
TEST(LeastConn, EachWorkerSpreadsTiesWithItsOwnCursor) {
  TestPool p(3);
  LeastConn lc(p.span(), LeastConn::Mode::scan, 2);
  PickContext second;
  second.worker = 1;
  EXPECT_EQ(picks(lc, 3), (Seq{0, 1, 2}));
  EXPECT_EQ(picks(lc, 3, second), (Seq{1, 2, 0}));
  EXPECT_EQ(picks(lc, 2), (Seq{0, 1}));
}

TEST(LeastConn, PrefersFewestInFlightPerWeight) {
  TestPool p({1, 2, 1});
  LeastConn lc(p.span());
  load(p[0], 2);  // 2 / 1
  load(p[1], 3);  // 3 / 2 = 1.5
  load(p[2], 1);  // 1 / 1
  EXPECT_EQ(lc.pick({}).index, 2u);
  load(p[2], 2);  // 3 / 1
  EXPECT_EQ(lc.pick({}).index, 1u);
  p[1].end_request();
  p[1].end_request();  // 1 / 2
  EXPECT_EQ(lc.pick({}).index, 1u);
}

TEST(LeastConn, SlowStartShareCountsAsLessWeight) {
  TestPool p(2);
  LeastConn lc(p.span());
  p[0].set_weight_share(250);  // ramping: a quarter of its weight
  for (int i = 0; i < 500; ++i) p[lc.pick({}).index].begin_request();
  EXPECT_EQ(p[0].in_flight(), 100);
  EXPECT_EQ(p[1].in_flight(), 400);
}

TEST(LeastConn, LoadFollowsWeightsWhenRequestsPileUp) {
  TestPool p({3, 1, 2});
  LeastConn lc(p.span());
  // Every picked request stays in flight: the pool fills in proportion to the weights.
  for (int i = 0; i < 600; ++i) p[lc.pick({}).index].begin_request();
  EXPECT_EQ(p[0].in_flight(), 300);
  EXPECT_EQ(p[1].in_flight(), 100);
  EXPECT_EQ(p[2].in_flight(), 200);
}

TEST(LeastConn, CompletedRequestsFreeTheirServer) {
  TestPool p(3);
  LeastConn lc(p.span());
  load(p[0], 1);
  load(p[1], 1);
  load(p[2], 1);
  p[1].end_request();
  EXPECT_EQ(lc.pick({}).index, 1u);
  EXPECT_EQ(lc.pick({}).index, 1u);
}

TEST(LeastConn, SkipsUnavailableTriedAndFullServers) {
  TestPool p(4);
  LeastConn lc(p.span());
  load(p[0], 5);
  load(p[1], 5);
  p[2].set_state(ServerState::down);
  p[3].set_max_conns(1);
  load(p[3], 1);
  // Idle s2 is down and s3 is at its cap: the lightest eligible is s0 or s1.
  const auto first = lc.pick({}).index;
  EXPECT_TRUE(first == 0 || first == 1);
  TriedSet tried;
  tried.add(first);
  EXPECT_EQ(lc.pick(PickContext{&tried}).index, first == 0 ? 1u : 0u);
  tried.add(first == 0 ? 1 : 0);
  EXPECT_FALSE(lc.pick(PickContext{&tried}));
  p[3].end_request();
  EXPECT_EQ(lc.pick(PickContext{&tried}).index, 3u);
}

TEST(LeastConn, EmptyUpstreamPicksNothing) {
  LeastConn lc(std::span<Endpoint* const>{});
  EXPECT_FALSE(lc.pick({}));
}

TEST(LeastConn, TwoChoicesKeepsLoadsClose) {
  TestPool p(100);
  LeastConn lc(p.span(), LeastConn::Mode::two_choices);
  for (int i = 0; i < 10000; ++i) p[lc.pick({}).index].begin_request();
  std::int64_t lo = INT64_MAX;
  std::int64_t hi = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    lo = std::min(lo, p[i].in_flight());
    hi = std::max(hi, p[i].in_flight());
  }
  // Mean 100. Power of two choices: max - mean is O(log log n); 2,000 random streams gave
  // 93..103 at worst. One random choice would give about 75..125.
  EXPECT_LE(hi, 106);
  EXPECT_GE(lo, 90);
}

TEST(LeastConn, TwoChoicesSkipsAndFallsBackToScan) {
  TestPool p(100);
  LeastConn lc(p.span());  // automatic: > 32 servers = two choices
  for (std::size_t i = 0; i < p.size(); ++i)
    if (i != 57) p[i].set_state(ServerState::down);
  EXPECT_EQ(picks(lc, 5), (Seq{57, 57, 57, 57, 57}));
  TriedSet tried;
  tried.add(57);
  EXPECT_FALSE(lc.pick(PickContext{&tried}));
}

TEST(LeastConnConcurrency, ThreadsShareOneCount) {
  TestPool p(5);
  LeastConn lc(p.span());
  const auto hits = balancer_test::pick_concurrently(lc, p, 2, 20000, balancer_test::no_key);
  EXPECT_EQ(hits.back(), 0);
  for (std::size_t i = 0; i < p.size(); ++i) {
    // 8,000 each when spread evenly. A thread preempted between begin and end holds its server
    // for a whole time slice, in which the other thread skips that server (it is busy): each
    // thread alone still spreads its 20,000 picks evenly, so every server gets about 4,000 from
    // either thread whatever the scheduler does.
    EXPECT_GT(hits[i], 2000) << i;
    EXPECT_EQ(p[i].in_flight(), 0);
  }
}

TEST(LeastConnConcurrency, TwoChoicesUnderThreads) {
  TestPool p(80);
  LeastConn lc(p.span(), LeastConn::Mode::two_choices);
  const auto hits = balancer_test::pick_concurrently(lc, p, 2, 20000, balancer_test::no_key);
  EXPECT_EQ(hits.back(), 0);
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_EQ(p[i].in_flight(), 0);
}

}  // namespace
}  // namespace sluice
