#include "sluice/balancer/two_choices.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "sluice/balancer/registry.hpp"
#include "test_pool.hpp"

namespace sluice {
namespace {

using balancer_test::counts;
using balancer_test::picks;
using balancer_test::TestPool;
using std::chrono::milliseconds;
using std::chrono::seconds;
constexpr Clock::duration decay = seconds(10);

struct LeastTime : ::testing::Test {
  ManualClock clock;
  TwoChoices make(TestPool& p, std::uint64_t seed = 11) {
    return TwoChoices(p.span(), {.cost = TwoChoices::Cost::first_byte_time, .seed = seed, .decay = decay, .clock = &clock});
  }
  void answer(Endpoint& e, Clock::duration first_byte) { e.first_byte_time().observe(first_byte, clock.now(), decay); }
};

// One 200 ms answer makes a server the most expensive at once: two fast servers take everything.
TEST_F(LeastTime, OneSlowAnswerSteersAwayAtOnce) {
  TestPool p(3);
  auto b = make(p);
  for (int i = 0; i < 3; ++i) answer(p[i], milliseconds(1));
  EXPECT_GT(counts(picks(b, 300), 3)[2], 50);
  answer(p[2], milliseconds(200));
  EXPECT_EQ(counts(picks(b, 300), 3)[2], 0);
}

// The cost is estimate x (in flight + 1): a fast server loaded past the slow one's ratio loses.
TEST_F(LeastTime, CostGrowsWithRequestsInFlight) {
  TestPool p(2);
  auto b = make(p);
  answer(p[0], milliseconds(1));
  answer(p[1], milliseconds(10));
  for (int i = 0; i < 9; ++i) p[0].begin_request();  // 1 x 10 == 10 x 1: a tie, lighter wins
  EXPECT_EQ(b.time_cost(p[0], clock.now(), 0), b.time_cost(p[1], clock.now(), 0));
  EXPECT_EQ(counts(picks(b, 50), 2), (std::vector<int>{0, 50}));
  p[0].end_request();  // 1 x 9 < 10
  EXPECT_EQ(counts(picks(b, 50), 2), (std::vector<int>{50, 0}));
}

// As fast answers come back, the estimate falls over `decay` and the server wins again.
TEST_F(LeastTime, ADecayedEstimateWinsAgain) {
  TestPool p(2);
  auto b = make(p);
  answer(p[0], milliseconds(20));
  answer(p[1], milliseconds(5));
  EXPECT_EQ(counts(picks(b, 20), 2), (std::vector<int>{0, 20}));
  for (int i = 0; i < 100; ++i) {  // 2 s of 1 ms answers on s0, 5 ms on s1
    clock.advance(milliseconds(20));
    answer(p[0], milliseconds(1));
    answer(p[1], milliseconds(5));
  }
  // s0: 1 + 19 x e^-0.2 = 16.6 ms, still the dearer; 18 s later 1 + 19 x e^-2 = 3.6 ms < 5.
  EXPECT_EQ(counts(picks(b, 20), 2), (std::vector<int>{0, 20}));
  for (int i = 0; i < 900; ++i) {
    clock.advance(milliseconds(20));
    answer(p[0], milliseconds(1));
    answer(p[1], milliseconds(5));
  }
  EXPECT_EQ(counts(picks(b, 20), 2), (std::vector<int>{20, 0}));
}

// A server with no estimate costs the median of the others' (2 ms of 1, 2 and 30): it is picked
// over the 30 ms one, never over the 1 ms one, and its share is a real one.
TEST_F(LeastTime, ANewServerStartsFromTheMedian) {
  TestPool p(4);
  auto b = make(p);
  answer(p[0], milliseconds(1));
  answer(p[1], milliseconds(2));
  answer(p[2], milliseconds(30));
  EXPECT_DOUBLE_EQ(b.median_estimate(clock.now()), 2e6);
  EXPECT_DOUBLE_EQ(b.time_cost(p[3], clock.now(), b.median_estimate(clock.now())), 2e6);
  const auto c = counts(picks(b, 600), 4);
  EXPECT_EQ(c[2], 0);
  EXPECT_GT(c[3], 100);
  EXPECT_GT(c[0], c[3]);
}

// A server that had no sample for `decay` (down, drained, or avoided) comes back at the median.
TEST_F(LeastTime, AReturningServerStartsFromTheMedian) {
  TestPool p(3);
  auto b = make(p);
  answer(p[0], milliseconds(300));
  p[0].set_state(ServerState::down);
  for (int i = 0; i < 11; ++i) {
    clock.advance(seconds(1));
    answer(p[1], milliseconds(2));
    answer(p[2], milliseconds(4));
  }
  p[0].set_state(ServerState::up);
  EXPECT_FALSE(p[0].first_byte_time().estimate(clock.now(), decay));
  EXPECT_DOUBLE_EQ(b.time_cost(p[0], clock.now(), b.median_estimate(clock.now())), 4e6);
  EXPECT_GT(counts(picks(b, 300), 3)[0], 25);  // ties s2 (4 ms), loses to s1: ~1/6
}

// Weights divide the cost: equal estimates on weights 1 and 3 share 1:3 when idle.
TEST_F(LeastTime, WeightsAreHonoured) {
  TestPool p{1, 3};
  auto b = make(p);
  answer(p[0], milliseconds(2));
  answer(p[1], milliseconds(2));
  const auto c = counts(picks(b, 4000), 2);
  EXPECT_EQ(c[0], 0);  // 2 ms / 1 > 2 ms / 3 whenever both are drawn: s1 always wins
  p[1].begin_request();
  p[1].begin_request();  // 2 x 3 / 3 == 2 x 1 / 1: a tie; in flight per weight 2/3 > 0
  EXPECT_EQ(counts(picks(b, 100), 2)[1], 0);
}

// The cheapest server draining: nothing goes there; tried servers are excluded too.
TEST_F(LeastTime, DrainsAreRespected) {
  TestPool p(3);
  auto b = make(p);
  answer(p[0], milliseconds(1));
  answer(p[1], milliseconds(5));
  answer(p[2], milliseconds(9));
  p[0].set_draining(true);
  EXPECT_EQ(counts(picks(b, 100), 3)[0], 0);
  TriedSet tried;
  tried.add(1);
  PickContext ctx;
  ctx.tried = &tried;
  EXPECT_EQ(counts(picks(b, 100, ctx), 3), (std::vector<int>{0, 0, 100}));
}

TEST_F(LeastTime, RegisteredAsLeastTime) {
  TestPool p(3);
  answer(p[0], milliseconds(1));
  answer(p[1], milliseconds(50));
  answer(p[2], milliseconds(50));
  auto b = make_balancer(config::Balance::least_time, p.span(),
                         BalancerOptions{.seed = 1, .decay = decay, .clock = &clock});
  EXPECT_GT(counts(picks(*b, 300), 3)[0], 150);
}

}  // namespace
}  // namespace sluice
