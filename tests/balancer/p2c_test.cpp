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
using Seq = std::vector<std::uint32_t>;

TwoChoices::Options p2c(std::uint64_t seed, unsigned workers = default_worker_slots) {
  return {.cost = TwoChoices::Cost::in_flight, .seed = seed, .workers = workers};
}

void load(Endpoint& e, int requests) {
  for (int i = 0; i < requests; ++i) e.begin_request();
}

// The seed fixes the sequence: pinned, so that a change of the draw is seen.
TEST(P2C, ASeedGivesAnExactSequence) {
  TestPool p(4);
  TwoChoices b(p.span(), p2c(42));
  const Seq expected = picks(b, 12);
  TwoChoices again(p.span(), p2c(42));
  EXPECT_EQ(picks(again, 12), expected);
  EXPECT_EQ(expected, (Seq{0, 1, 3, 0, 3, 3, 1, 2, 0, 3, 1, 3}));
}

// Each worker draws from its own stream: worker 1's picks do not move worker 0's sequence.
TEST(P2C, EachWorkerHasItsOwnStream) {
  TestPool p(4);
  TwoChoices alone(p.span(), p2c(7));
  const Seq expected = picks(alone, 8);
  TwoChoices shared(p.span(), p2c(7));
  PickContext w1;
  w1.worker = 1;
  Seq seen;
  for (int i = 0; i < 8; ++i) {
    seen.push_back(shared.pick({}).index);
    shared.pick(w1);
  }
  EXPECT_EQ(seen, expected);
}

// Of two servers, every pick compares both: the one with fewer requests in flight wins.
TEST(P2C, TheLighterOfTheTwoWins) {
  TestPool p(2);
  TwoChoices b(p.span(), p2c(1));
  load(p[0], 3);
  EXPECT_EQ(counts(picks(b, 200), 2), (std::vector<int>{0, 200}));
  load(p[1], 4);
  EXPECT_EQ(counts(picks(b, 200), 2), (std::vector<int>{200, 0}));
}

// Load is compared per unit of weight: 6 in flight on weight 3 is lighter than 3 on weight 1.
TEST(P2C, LoadIsPerUnitOfWeight) {
  TestPool p{1, 3};
  TwoChoices b(p.span(), p2c(1));
  load(p[0], 3);
  load(p[1], 6);
  EXPECT_EQ(counts(picks(b, 100), 2), (std::vector<int>{0, 100}));
}

// Idle servers share in proportion to weight (the first draw is weighted and wins ties):
// weights 1, 2, 5 over 8,000 picks (seed fixed) within 5 % of 1,000 / 2,000 / 5,000.
TEST(P2C, IdleServersShareByWeight) {
  TestPool p{1, 2, 5};
  TwoChoices b(p.span(), p2c(3));
  const auto c = counts(picks(b, 8000), 3);
  EXPECT_NEAR(c[0], 1000, 50);
  EXPECT_NEAR(c[1], 2000, 100);
  EXPECT_NEAR(c[2], 5000, 250);
}

// Slow start: a server at 10 % of its share is drawn ~10 times less often.
TEST(P2C, SlowStartShareCounts) {
  TestPool p(2);
  p[1].set_weight_share(100);
  TwoChoices b(p.span(), p2c(5));
  const auto c = counts(picks(b, 11000), 2);
  EXPECT_NEAR(c[1], 1000, 100);
}

// Draining, down and tried servers are never picked; with every server out, none is.
TEST(P2C, SkipsDrainingDownAndTried) {
  TestPool p(4);
  TwoChoices b(p.span(), p2c(9));
  p[0].set_draining(true);
  p[1].set_state(ServerState::down);
  TriedSet tried;
  tried.add(2);
  PickContext ctx;
  ctx.tried = &tried;
  EXPECT_EQ(counts(picks(b, 100, ctx), 4), (std::vector<int>{0, 0, 0, 100}));
  p[3].set_draining(true);
  EXPECT_FALSE(b.pick(ctx));
}

TEST(P2C, RegisteredAsP2C) {
  TestPool p(3);
  auto b = make_balancer(config::Balance::p2c, p.span(), BalancerOptions{.seed = 42});
  TwoChoices direct(p.span(), p2c(42));
  EXPECT_EQ(picks(*b, 10), picks(direct, 10));
}

}  // namespace
}  // namespace sluice
