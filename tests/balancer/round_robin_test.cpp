#include "sluice/balancer/round_robin.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sluice/balancer/registry.hpp"
#include "sluice/endpoint/endpoint.hpp"
#include "test_pool.hpp"

namespace sluice {
namespace {

using Pool = balancer_test::TestPool;
using balancer_test::picks;

// round_robin honours weights (nginx, HAProxy): unequal weights give the smooth weighted
// sequence, the same as balance = "weighted"; equal weights the plain rotation.
TEST(RoundRobin, HonoursWeightsWithTheSmoothSequence) {
  Pool p({5, 1, 1});
  auto rr = make_balancer(config::Balance::round_robin, p.span(), BalancerOptions{});
  ASSERT_NE(rr, nullptr);
  // a a b a c a a, twice.
  EXPECT_EQ(picks(*rr, 14), (std::vector<std::uint32_t>{0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0}));
  Pool equal(3);
  auto plain = make_balancer(config::Balance::round_robin, equal.span(), BalancerOptions{});
  EXPECT_NE(dynamic_cast<RoundRobin*>(plain.get()), nullptr);
  EXPECT_EQ(picks(*plain, 4), (std::vector<std::uint32_t>{0, 1, 2, 0}));
}

TEST(RoundRobin, CyclesInListOrder) {
  Pool p(3);
  RoundRobin rr(p.raw);
  EXPECT_EQ(picks(rr, 7), (std::vector<std::uint32_t>{0, 1, 2, 0, 1, 2, 0}));
}

TEST(RoundRobin, ARetryDoesNotTakeTheNextRequestsTurn) {
  Pool p(2);
  RoundRobin rr(p.raw);
  TriedSet tried;
  EXPECT_EQ(rr.pick({&tried}).index, 0u);  // request 1
  tried.add(0);
  EXPECT_EQ(rr.pick({&tried}).index, 1u);  // its retry
  TriedSet fresh;
  EXPECT_EQ(rr.pick({&fresh}).index, 1u);  // request 2: its own turn, not server 0 again
  EXPECT_EQ(rr.pick({&fresh}).index, 0u);
}

TEST(RoundRobin, EmptyUpstreamPicksNothing) {
  RoundRobin rr(std::span<Endpoint* const>{});
  EXPECT_FALSE(rr.pick({}));
}

TEST(RoundRobin, SkipsUnavailableAndKeepsOthersEven) {
  Pool p(3);
  RoundRobin rr(p.raw);
  p.owned[1]->set_state(ServerState::down);
  EXPECT_EQ(picks(rr, 6), (std::vector<std::uint32_t>{0, 2, 0, 2, 0, 2}));
  p.owned[1]->set_state(ServerState::up);
  p.owned[2]->set_draining(true);
  const auto seq = picks(rr, 6);
  EXPECT_EQ(std::count(seq.begin(), seq.end(), 0u), 3);
  EXPECT_EQ(std::count(seq.begin(), seq.end(), 1u), 3);
}

TEST(RoundRobin, AllUnavailablePicksNothing) {
  Pool p(2);
  RoundRobin rr(p.raw);
  p.owned[0]->set_state(ServerState::ejected);
  p.owned[1]->set_state(ServerState::down);
  EXPECT_FALSE(rr.pick({}));
}

TEST(RoundRobin, TriedServersYieldFallbacksThenNothing) {
  Pool p(3);
  RoundRobin rr(p.raw);
  TriedSet tried;
  PickContext ctx{&tried};
  for (int i = 0; i < 3; ++i) {
    const auto pick = rr.pick(ctx);
    ASSERT_TRUE(pick);
    EXPECT_FALSE(tried.contains(pick.index));
    tried.add(pick.index);
  }
  EXPECT_FALSE(rr.pick(ctx));
}

TEST(RoundRobin, SkipsServersAtMaxConns) {
  Pool p(3);
  RoundRobin rr(p.raw);
  p[0].set_max_conns(1);
  p[0].begin_request();
  EXPECT_EQ(picks(rr, 4), (std::vector<std::uint32_t>{1, 2, 1, 2}));
  p[0].end_request();
  EXPECT_EQ(picks(rr, 3), (std::vector<std::uint32_t>{0, 1, 2}));
}

PickContext as_worker(unsigned w, const TriedSet* tried = nullptr) {
  PickContext ctx{tried};
  ctx.worker = w;
  return ctx;
}

// Each worker has its own cursor (no cache line written by every worker on every request): its
// rotation is not disturbed by the others' picks, and worker w starts at server w.
TEST(RoundRobin, EachWorkerRotatesOverAllServersOnItsOwn) {
  Pool p(3);
  RoundRobin rr(p.raw, 4);
  std::vector<std::uint32_t> w0, w1, w3;
  for (int i = 0; i < 6; ++i) {
    w0.push_back(rr.pick(as_worker(0)).index);
    w1.push_back(rr.pick(as_worker(1)).index);
    if (i % 2 == 0) w3.push_back(rr.pick(as_worker(3)).index);
  }
  EXPECT_EQ(w0, (std::vector<std::uint32_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(w1, (std::vector<std::uint32_t>{1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(w3, (std::vector<std::uint32_t>{0, 1, 2}));  // 3 % 3 servers: starts at s0
  // A retry on one worker moves no cursor, a skip moves only its own.
  TriedSet tried;
  tried.add(0);
  EXPECT_EQ(rr.pick(as_worker(0, &tried)).index, 1u);
  p.owned[1]->set_state(ServerState::down);
  EXPECT_EQ(rr.pick(as_worker(1)).index, 2u);  // its turn was s1's: skipped
  p.owned[1]->set_state(ServerState::up);
  EXPECT_EQ(rr.pick(as_worker(0)).index, 0u);  // worker 0 still where it was
  EXPECT_EQ(rr.pick(as_worker(1)).index, 0u);  // worker 1 went on past s2
}

TEST(RoundRobin, ConcurrentPicksAreExact) {
  Pool p(3);
  RoundRobin rr(p.raw);
  // Each thread is a worker with its own cursor and makes whole rotations: exact totals.
  const auto hits = balancer_test::pick_concurrently(rr, p, 2, 30000, balancer_test::no_key);
  EXPECT_EQ(hits, (std::vector<long>{20000, 20000, 20000, 0}));
  // Not whole rotations: each worker is off by at most one per server.
  Pool q(4);
  RoundRobin uneven(q.raw);
  const auto spread = balancer_test::pick_concurrently(uneven, q, 3, 10001, balancer_test::no_key);
  EXPECT_EQ(spread.back(), 0);
  for (std::size_t i = 0; i < q.size(); ++i) {
    EXPECT_GE(spread[i], 7500) << i;
    EXPECT_LE(spread[i], 7503) << i;
  }
}

TEST(TriedSet, IgnoresDuplicatesAndCapsAtCapacity) {
  TriedSet t;
  t.add(3);
  t.add(3);
  EXPECT_EQ(t.size(), 1u);
  for (std::uint32_t i = 0; i < 40; ++i) t.add(i);
  EXPECT_EQ(t.size(), TriedSet::capacity);
}

}  // namespace
}  // namespace sluice
