#include "sluice/upstream/retry_budget.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "sluice/core/clock.hpp"

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RetryBudget, ReserveIsThereBeforeAnyRequest) {
  ManualClock clock;
  RetryBudget b(0.2, seconds(10), 10);
  // 10 retries per second x a 10 s window.
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(b.try_retry(clock.now())) << i;
  EXPECT_FALSE(b.try_retry(clock.now()));
}

TEST(RetryBudget, EveryRequestDepositsItsShare) {
  ManualClock clock;
  RetryBudget b(0.2, seconds(10), 0);
  EXPECT_FALSE(b.try_retry(clock.now()));
  for (int i = 0; i < 10; ++i) b.begin_request(clock.now());
  EXPECT_TRUE(b.try_retry(clock.now()));
  EXPECT_TRUE(b.try_retry(clock.now()));
  EXPECT_FALSE(b.try_retry(clock.now()));
}

TEST(RetryBudget, ABurstFromOneDeadServerIsRetriedInFull) {
  // 150 req/s for 10 s, then 75 requests fail at once (those in flight on the dead server).
  ManualClock clock;
  RetryBudget b(0.2, seconds(10), 10);
  for (int s = 0; s < 10; ++s) {
    for (int i = 0; i < 150; ++i) b.begin_request(clock.now());
    clock.advance(seconds(1));
  }
  for (int i = 0; i < 75; ++i) EXPECT_TRUE(b.try_retry(clock.now())) << i;
}

TEST(RetryBudget, DepositsExpireAfterTheWindow) {
  ManualClock clock;
  RetryBudget b(0.2, seconds(10), 0);
  for (int i = 0; i < 1000; ++i) b.begin_request(clock.now());
  EXPECT_DOUBLE_EQ(b.balance(clock.now()), 200);
  clock.advance(seconds(9));
  EXPECT_DOUBLE_EQ(b.balance(clock.now()), 200);  // still within the window
  clock.advance(seconds(1));
  EXPECT_DOUBLE_EQ(b.balance(clock.now()), 0);  // gone: no storm saved up
  EXPECT_FALSE(b.try_retry(clock.now()));
}

TEST(RetryBudget, TheReserveIsBackAfterAnIdleSpell) {
  ManualClock clock;
  RetryBudget b(0.2, seconds(10), 10);
  while (b.try_retry(clock.now())) {
  }
  clock.advance(std::chrono::minutes(2));
  EXPECT_TRUE(b.try_retry(clock.now()));  // the first retry after a quiet spell
  EXPECT_DOUBLE_EQ(b.balance(clock.now()), 99);
}

// The bound, on a manual clock: an all-failing fleet under steady load. In every window,
// retries <= budget x requests + min_per_sec x window; over a long run the average rate of
// retries approaches budget x request rate + min_per_sec.
TEST(RetryBudget, RetriesNeverExceedTheBoundInAnyWindow) {
  ManualClock clock;
  const double budget = 0.2, min_per_sec = 10;
  RetryBudget b(budget, seconds(10), min_per_sec);
  std::vector<int> requests, retries;  // per 100 ms step
  for (int step = 0; step < 600; ++step) {  // 60 s at 500 req/s, every request wanting a retry
    int granted = 0;
    for (int i = 0; i < 50; ++i) {
      b.begin_request(clock.now());
      if (b.try_retry(clock.now())) ++granted;
    }
    requests.push_back(50);
    retries.push_back(granted);
    clock.advance(milliseconds(100));
  }
  // Every 10 s run of steps: the bound, with the stated slack of one slot (window / 10 = 1 s) of
  // deposits, since the window is exact to one slot.
  for (std::size_t start = 0; start + 100 <= retries.size(); ++start) {
    int r = 0, q = 0;
    for (std::size_t i = start; i < start + 100; ++i) r += retries[i], q += requests[i];
    EXPECT_LE(r, budget * (q + 500) + min_per_sec * 10) << "window starting at step " << start;
  }
  const int total = std::accumulate(retries.begin(), retries.end(), 0);
  EXPECT_LE(total, budget * 30000 + min_per_sec * 60 + min_per_sec * 10);
  EXPECT_GE(total, budget * 30000);  // and the budget is really available
}

TEST(RetryBudgets, EachWorkerHasItsSliceOfTheReserve) {
  config::RetryConfig p;  // defaults: 0.2, 10 s, 10/s
  RetryBudgets budgets(p, 4);
  ManualClock clock;
  int granted = 0;
  for (unsigned w = 0; w < 4; ++w)
    while (budgets.slice(w).try_retry(clock.now())) ++granted;
  EXPECT_EQ(granted, 100);  // the whole reserve, split four ways
  EXPECT_NE(&budgets.slice(0), &budgets.slice(1));
  EXPECT_EQ(&budgets.slice(4), &budgets.slice(0));
}

}  // namespace
}  // namespace sluice
