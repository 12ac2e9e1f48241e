#include "sluice/endpoint/peak_ewma.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
constexpr Clock::duration decay = seconds(10);

double ms(const std::optional<double>& ns) { return ns.value_or(-1) / 1e6; }

TEST(PeakEwma, NeverSampledHasNoEstimate) {
  ManualClock clock;
  PeakEwma e;
  EXPECT_FALSE(e.estimate(clock.now(), decay));
  EXPECT_EQ(e.last(), 0.0);
}

TEST(PeakEwma, FirstSampleIsTheEstimate) {
  ManualClock clock;
  PeakEwma e;
  e.observe(milliseconds(3), clock.now(), decay);
  EXPECT_DOUBLE_EQ(ms(e.estimate(clock.now(), decay)), 3.0);
}

// One slow answer raises the estimate at once, whatever came before.
TEST(PeakEwma, ASlowAnswerRaisesTheEstimateAtOnce) {
  ManualClock clock;
  PeakEwma e;
  for (int i = 0; i < 100; ++i) {
    e.observe(milliseconds(1), clock.now(), decay);
    clock.advance(milliseconds(10));
  }
  e.observe(milliseconds(200), clock.now(), decay);
  EXPECT_DOUBLE_EQ(ms(e.estimate(clock.now(), decay)), 200.0);
}

// Fast answers lower it with weight 1 - exp(-dt / decay) each: over time, not over a count.
// 1 ms answers every 10 ms after a 200 ms one: after `decay` (1,000 answers) the excess over
// 1 ms is 1/e of 199 ms; after 3 x decay, 1/e^3.
TEST(PeakEwma, FastAnswersLowerItOverDecay) {
  ManualClock clock;
  PeakEwma e;
  e.observe(milliseconds(200), clock.now(), decay);
  auto after = [&](int answers) {
    for (int i = 0; i < answers; ++i) {
      clock.advance(milliseconds(10));
      e.observe(milliseconds(1), clock.now(), decay);
    }
    return ms(e.estimate(clock.now(), decay));
  };
  EXPECT_NEAR(after(1), 1 + 199 * std::exp(-0.001), 1e-6);
  EXPECT_NEAR(after(999), 1 + 199 * std::exp(-1.0), 1e-6);
  EXPECT_NEAR(after(2000), 1 + 199 * std::exp(-3.0), 1e-6);
  // The same decay whatever the rate: 10 answers a second instead of 100.
  PeakEwma slow_rate;
  ManualClock c2;
  slow_rate.observe(milliseconds(200), c2.now(), decay);
  for (int i = 0; i < 100; ++i) {
    c2.advance(milliseconds(100));
    slow_rate.observe(milliseconds(1), c2.now(), decay);
  }
  EXPECT_NEAR(ms(slow_rate.estimate(c2.now(), decay)), 1 + 199 * std::exp(-1.0), 1e-6);
}

// No sample for longer than `decay`: forgotten; the next sample starts afresh.
TEST(PeakEwma, AnEstimateWithoutSamplesForDecayIsForgotten) {
  ManualClock clock;
  PeakEwma e;
  e.observe(milliseconds(200), clock.now(), decay);
  clock.advance(decay);
  EXPECT_DOUBLE_EQ(ms(e.estimate(clock.now(), decay)), 200.0);
  clock.advance(milliseconds(1));
  EXPECT_FALSE(e.estimate(clock.now(), decay));
  EXPECT_DOUBLE_EQ(e.last() / 1e6, 200.0);  // still shown in metrics
  e.observe(milliseconds(2), clock.now(), decay);
  EXPECT_DOUBLE_EQ(ms(e.estimate(clock.now(), decay)), 2.0);
}

}  // namespace
}  // namespace sluice
