#include "sluice/proxy/retry.hpp"

#include <gtest/gtest.h>

#include "sluice/core/clock.hpp"

namespace sluice::proxy {
namespace {

using F = FailureKind;
using std::chrono::milliseconds;
using std::chrono::seconds;
const config::RetryConfig defaults{};

// The rules of the issue, restated independently of the implementation: the oracle for the
// exhaustive table below.
RetrySkip expected(F failure, unsigned status, bool idempotent, bool key, bool sent, bool started,
                   bool body_kept) {
  if (started) return RetrySkip::response_started;
  const bool listed = failure == F::none ? (status == 502 || status == 503 || status == 504)
                                         : failure != F::client_failed;
  if (!listed) return RetrySkip::not_retryable;
  const bool unreached = failure == F::connect_refused || failure == F::connect_timeout ||
                         failure == F::connect_error || failure == F::reset_before_send ||
                         failure == F::tls_failed || !sent;
  if (unreached) return body_kept ? RetrySkip::none : RetrySkip::body_too_large;
  if (!idempotent && !key) return RetrySkip::not_idempotent;
  if (!body_kept) return RetrySkip::body_too_large;
  return RetrySkip::none;
}

TEST(RetryEligibility, EveryCombinationFollowsTheRules) {
  const F failures[] = {F::none,          F::connect_refused,  F::connect_timeout,
                        F::connect_error, F::reset_before_send, F::reset_after_send,
                        F::response_timeout, F::bad_response,  F::client_failed,
                        F::tls_failed};
  const unsigned statuses[] = {200, 404, 500, 502, 503, 504};
  int cases = 0;
  for (const auto failure : failures)
    for (const auto status : statuses) {
      if (failure != F::none && status != 200) continue;  // a failure has no status
      for (const bool idempotent : {false, true})
        for (const bool key : {false, true})
          for (bool sent : {false, true})
            for (const bool started : {false, true})
              for (const bool kept : {false, true}) {
                // Facts that cannot happen together: a connect failure sent nothing; an answer
                // means the request was sent.
                if ((failure == F::connect_refused || failure == F::connect_timeout ||
                     failure == F::connect_error || failure == F::reset_before_send ||
                     failure == F::tls_failed) && sent)
                  continue;
                if (failure == F::none && !sent) continue;
                auto a = failure == F::none ? Failure::answered(status) : Failure::of(failure);
                a.request_bytes_sent = sent;
                a.response_started = started;
                RequestFacts r{idempotent, key, kept};
                ++cases;
                EXPECT_EQ(eligibility(defaults, a, r),
                          expected(failure, a.status, idempotent, key, sent, started, kept))
                    << "failure=" << health::describe(failure) << " status=" << a.status
                    << " idempotent=" << idempotent << " key=" << key << " sent=" << sent
                    << " started=" << started << " kept=" << kept;
              }
    }
  EXPECT_GT(cases, 150);
}

TEST(RetryEligibility, PostWithoutKeyThatReachedTheServerIsNeverRetried) {
  auto a = Failure::of(F::reset_after_send);
  a.request_bytes_sent = true;
  EXPECT_EQ(eligibility(defaults, a, {false, false, true}), RetrySkip::not_idempotent);
  EXPECT_EQ(eligibility(defaults, a, {false, true, true}), RetrySkip::none);
}

TEST(RetryEligibility, PostToAClosedPortIsRetried) {
  const auto a = Failure::of(F::connect_refused);
  EXPECT_EQ(eligibility(defaults, a, {false, false, true}), RetrySkip::none);
}

TEST(RetryEligibility, OnListRestrictsWhatIsRetried) {
  config::RetryConfig p;
  p.on_connect = p.on_reset = p.on_timeout = false;
  p.on_refused = true;
  p.on_status = {503};
  EXPECT_TRUE(is_listed(p, Failure::of(F::connect_refused)));
  EXPECT_FALSE(is_listed(p, Failure::of(F::connect_timeout)));
  EXPECT_FALSE(is_listed(p, Failure::of(F::reset_after_send)));
  EXPECT_FALSE(is_listed(p, Failure::answered(502)));
  EXPECT_TRUE(is_listed(p, Failure::answered(503)));
}

// A listed gRPC code in a trailers-only answer is retried whatever the method (the body at hand);
// the same code unlisted, or the answer not trailers-only (no grpc_status), is delivered.
TEST(RetryEligibility, ListedGrpcCodeIsRetriedWhateverTheMethod) {
  config::RetryConfig p;
  p.on_grpc = 1u << 14;  // grpc:unavailable
  auto unavailable = Failure::answered(200);
  unavailable.grpc_status = 14;
  auto not_found = Failure::answered(200);
  not_found.grpc_status = 5;
  EXPECT_TRUE(is_listed(p, unavailable));
  EXPECT_EQ(eligibility(p, unavailable, {false, false, true}), RetrySkip::none);
  EXPECT_EQ(eligibility(p, unavailable, {false, false, false}), RetrySkip::body_too_large);
  EXPECT_FALSE(is_listed(p, not_found));
  EXPECT_FALSE(is_listed(p, Failure::answered(200)));
  EXPECT_FALSE(is_listed(defaults, unavailable));
}

TEST(RetryBackoff, FullJitterWithinExponentialBoundsAndCap) {
  config::RetryConfig p;
  p.backoff = std::chrono::milliseconds(25);
  p.backoff_max = std::chrono::milliseconds(250);
  using std::chrono::milliseconds;
  EXPECT_EQ(backoff_delay(p, 1, 0.0), milliseconds(0));
  EXPECT_EQ(backoff_delay(p, 1, 0.5), std::chrono::microseconds(12500));
  EXPECT_EQ(backoff_delay(p, 2, 0.5), milliseconds(25));
  EXPECT_EQ(backoff_delay(p, 3, 0.999999), std::chrono::nanoseconds(99'999'900));
  EXPECT_EQ(backoff_delay(p, 5, 0.5), milliseconds(125));  // 25*16 = 400, capped at 250
  EXPECT_EQ(backoff_delay(p, 40, 0.5), milliseconds(125));
  for (double u = 0; u < 1; u += 0.01) {
    EXPECT_LE(backoff_delay(p, 2, u), milliseconds(50));
    EXPECT_GE(backoff_delay(p, 2, u), milliseconds(0));
  }
}

}  // namespace
}  // namespace sluice::proxy
