// The dashboard's history: histogram quantiles and Totals arithmetic (the per-second sampling
// over a real snapshot is covered end to end by integration/test_dashboard.py).
#include "sluice/runtime/history.hpp"

#include <gtest/gtest.h>

namespace sluice {
namespace {

using Buckets = std::array<std::uint64_t, EndpointCounters::buckets + 1>;

TEST(HistoryQuantile, NoRequestsHaveNoQuantile) { EXPECT_FALSE(quantile_ms(Buckets{}, 0.99)); }

TEST(HistoryQuantile, InterpolatesWithinTheBucket) {
  Buckets b{};
  b[3] = 100;  // all in (5 ms, 10 ms]
  EXPECT_DOUBLE_EQ(*quantile_ms(b, 0.5), 7.5);
  EXPECT_DOUBLE_EQ(*quantile_ms(b, 0.99), 9.95);
}

TEST(HistoryQuantile, FindsTheBucketTheRankFallsIn) {
  Buckets b{};
  b[0] = 90;  // <= 1 ms
  b[6] = 10;  // (50 ms, 100 ms]
  EXPECT_LE(*quantile_ms(b, 0.5), 1.0);
  EXPECT_GT(*quantile_ms(b, 0.99), 50.0);
  EXPECT_LE(*quantile_ms(b, 0.99), 100.0);
}

TEST(HistoryQuantile, TheUnboundedBucketReadsAsTheLastBound) {
  Buckets b{};
  b[EndpointCounters::buckets] = 5;  // > 60 s
  EXPECT_DOUBLE_EQ(*quantile_ms(b, 0.99), 60000.0);
}

TEST(HistoryTotals, ALaterTotalMinusAnEarlierOneIsTheDelta) {
  Totals earlier, later;
  earlier.requests = 10;
  earlier.errors = 1;
  earlier.durations[2] = 4;
  later = earlier;
  later.requests += 5;
  later.durations[2] += 5;
  const Totals d = later - earlier;
  EXPECT_EQ(d.requests, 5U);
  EXPECT_EQ(d.errors, 0U);
  EXPECT_EQ(d.durations[2], 5U);
  Totals sum = d;
  sum += earlier;
  EXPECT_EQ(sum.requests, later.requests);
}

}  // namespace
}  // namespace sluice
