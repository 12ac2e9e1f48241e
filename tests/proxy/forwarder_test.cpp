#include "sluice/proxy/forwarder.hpp"

#include <gtest/gtest.h>

namespace sluice::proxy {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using K = FailureKind;

TEST(AttemptWindow, PerTryDefaultsToTheResponseTimeoutAndTheDeadlineToAllTries) {
  ManualClock clock;
  config::UpstreamConfig u;
  u.response_timeout = seconds(30);
  u.retry.attempts = 3;
  const auto start = clock.now();
  auto w = AttemptWindow::of(u, start);
  EXPECT_EQ(w.per_try, seconds(30));
  EXPECT_EQ(w.deadline, start + seconds(90));
  EXPECT_EQ(w.try_until(start + seconds(10)), start + seconds(40));
  EXPECT_EQ(w.try_until(start + seconds(80)), start + seconds(90));  // the deadline bounds a try

  u.retry.per_try_timeout = seconds(2);
  u.retry.deadline = seconds(5);
  w = AttemptWindow::of(u, start);
  EXPECT_EQ(w.per_try, seconds(2));
  EXPECT_EQ(w.deadline, start + seconds(5));
}

TEST(RetryAfter, ALaterComebackThanTheDeadlineIsNotWaitedFor) {
  ManualClock clock;
  const auto now = clock.now();
  EXPECT_TRUE(retry_after_exceeds("10", now, now + seconds(5)));
  EXPECT_FALSE(retry_after_exceeds("5", now, now + seconds(5)));
  EXPECT_FALSE(retry_after_exceeds("0", now, now + seconds(5)));
  EXPECT_FALSE(retry_after_exceeds("", now, now));
  // An HTTP-date (or garbage) is not seconds: the retry is not refused on its account.
  EXPECT_FALSE(retry_after_exceeds("Wed, 21 Oct 2015 07:28:00 GMT", now, now));
}

TEST(PooledIdleTime, TheOriginsShorterTimeoutWinsWithAMargin) {
  EXPECT_EQ(pooled_idle_time(seconds(30), std::nullopt), seconds(30));
  EXPECT_EQ(pooled_idle_time(seconds(30), seconds(5)), seconds(4));
  EXPECT_EQ(pooled_idle_time(seconds(30), seconds(2)), seconds(1));
  EXPECT_EQ(pooled_idle_time(seconds(3), seconds(60)), seconds(3));
}

TEST(AfterAttempt, AnAnswerIsDeliveredUnlessListedAndRetryable) {
  int asked = 0;
  const auto yes = [&] { ++asked; return true; };
  const auto no = [&] { ++asked; return false; };
  const auto ok = Failure::answered(200);
  const auto busy = Failure::answered(503);
  EXPECT_EQ(after_attempt(ok, false, true, yes), AfterAttempt::deliver);
  EXPECT_EQ(asked, 0);  // not listed: the budget is not asked (nor charged)
  EXPECT_EQ(after_attempt(busy, true, false, yes), AfterAttempt::deliver);
  EXPECT_EQ(asked, 0);  // the last attempt's answer goes to the client
  EXPECT_EQ(after_attempt(busy, true, true, no), AfterAttempt::deliver);
  EXPECT_EQ(after_attempt(busy, true, true, yes), AfterAttempt::retry);
  EXPECT_EQ(asked, 2);
}

TEST(AfterAttempt, AFailureIsRetriedWhenAllowedElseItStands) {
  int asked = 0;
  const auto yes = [&] { ++asked; return true; };
  const auto no = [&] { ++asked; return false; };
  const auto reset = Failure::of(K::reset_after_send);
  EXPECT_EQ(after_attempt(reset, false, false, yes), AfterAttempt::give_up);
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(after_attempt(reset, false, true, no), AfterAttempt::give_up);
  EXPECT_EQ(after_attempt(reset, false, true, yes), AfterAttempt::retry);
  EXPECT_EQ(asked, 2);
}

}  // namespace
}  // namespace sluice::proxy
