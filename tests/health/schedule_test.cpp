#include "sluice/health/schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <set>
#include <string>
#include <vector>

namespace sluice::health {
namespace {

using namespace std::chrono_literals;

const Clock::time_point t0{std::chrono::hours(1)};

TEST(HealthSchedule, SameSeedSameScheduleDifferentSeedDifferentSchedule) {
  ProbeSchedule a(5s, 0.1, 7);
  ProbeSchedule b(5s, 0.1, 7);
  ProbeSchedule c(5s, 0.1, 8);
  auto ta = a.first(t0);
  auto tb = b.first(t0);
  const auto tc = c.first(t0);
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
  for (int i = 0; i < 100; ++i) {
    ta = a.next(ta);
    tb = b.next(tb);
    ASSERT_EQ(ta, tb);
  }
}

TEST(HealthSchedule, SeedForIsStablePerIdentity) {
  EXPECT_EQ(ProbeSchedule::seed_for("app-1", 1), ProbeSchedule::seed_for("app-1", 1));
  EXPECT_NE(ProbeSchedule::seed_for("app-1", 1), ProbeSchedule::seed_for("app-2", 1));
  EXPECT_NE(ProbeSchedule::seed_for("app-1", 1), ProbeSchedule::seed_for("app-1", 2));
}

TEST(HealthSchedule, GapsStayWithinTheJitterBandAndAverageTheInterval) {
  ProbeSchedule s(2s, 0.1, 1);
  auto t = s.first(t0);
  Clock::duration lo = Clock::duration::max();
  Clock::duration hi = Clock::duration::min();
  Clock::duration sum{};
  constexpr int n = 10000;
  for (int i = 0; i < n; ++i) {
    const auto next = s.next(t);
    const auto gap = next - t;
    lo = std::min(lo, gap);
    hi = std::max(hi, gap);
    sum += gap;
    t = next;
  }
  EXPECT_GE(lo, 1800ms);
  EXPECT_LE(hi, 2200ms);
  EXPECT_LT(lo, 1810ms);  // the whole band is used, both sides
  EXPECT_GT(hi, 2190ms);
  const auto mean = sum / n;
  EXPECT_GT(mean, 1990ms);
  EXPECT_LT(mean, 2010ms);
}

TEST(HealthSchedule, NoJitterIsExactlyPeriodic) {
  ProbeSchedule s(5s, 0.0, 3);
  const auto first = s.first(t0);
  EXPECT_GE(first, t0);
  EXPECT_LT(first, t0 + 5s);
  EXPECT_EQ(s.next(first), first + 5s);
}

TEST(HealthSchedule, JitterIsClamped) {
  EXPECT_EQ(ProbeSchedule(5s, 3.0, 1).jitter(), 0.5);
  EXPECT_EQ(ProbeSchedule(5s, -1.0, 1).jitter(), 0.0);
}

// 50 servers probed every 5 s (±10 %), all configured at the same instant, for one simulated hour.
class HealthScheduleFleet : public ::testing::Test {
protected:
  static constexpr int servers = 50;
  static constexpr auto interval = 5s;
  std::vector<Clock::time_point> firsts;
  std::vector<Clock::time_point> all;

  void SetUp() override {
    for (int i = 0; i < servers; ++i) {
      ProbeSchedule s(interval, 0.1, ProbeSchedule::seed_for("10.0.0." + std::to_string(i) + ":80", 42));
      auto t = s.first(t0);
      firsts.push_back(t);
      for (; t < t0 + 1h; t = s.next(t)) all.push_back(t);
    }
    std::sort(all.begin(), all.end());
  }

  // The most probes in any window [t, t + width), over all t.
  std::size_t busiest(Clock::duration width) const {
    std::size_t most = 0;
    for (auto begin = all.begin(); begin != all.end(); ++begin) {
      const auto end = std::lower_bound(begin, all.end(), *begin + width);
      most = std::max(most, static_cast<std::size_t>(end - begin));
    }
    return most;
  }
};

TEST_F(HealthScheduleFleet, FirstProbesAreSpreadOverTheFirstInterval) {
  std::array<int, 5> per_second{};
  for (const auto t : firsts) {
    ASSERT_GE(t, t0);
    ASSERT_LT(t, t0 + interval);
    ++per_second[std::chrono::duration_cast<std::chrono::seconds>(t - t0).count()];
  }
  // 10 expected per second; a synchronised start would put all 50 in one.
  for (const int n : per_second) {
    EXPECT_GE(n, 4);
    EXPECT_LE(n, 18);
  }
}

TEST_F(HealthScheduleFleet, NoBurstsOverAnHour) {
  // 10 probes/s: about one per 100 ms. Independent jitter makes arrivals Poisson-like, whose
  // busiest 100 ms window in an hour typically holds 7-9 (P(≥ 11) per hour ≈ 0.5 %); synchronised
  // timers would put all 50 in one window, every interval.
  EXPECT_NEAR(static_cast<double>(all.size()), 36000.0, 360.0);
  const auto per_100ms = busiest(100ms);
  const auto per_second = busiest(1s);
  RecordProperty("busiest_100ms", static_cast<int>(per_100ms));
  RecordProperty("busiest_1s", static_cast<int>(per_second));
  EXPECT_LE(per_100ms, 10u);
  EXPECT_LE(per_second, 30u);  // 10 expected
}

TEST_F(HealthScheduleFleet, PacedStartsNeverExceedFivePer100msAndStayClose) {
  // The prober admits each due probe through one pacer: the bound, exactly.
  const auto cap = ProbePacer::cap_for(servers / 5.0, 100ms);
  EXPECT_EQ(cap, 5u);
  ProbePacer pacer(100ms, cap);
  std::vector<Clock::time_point> started;
  Clock::duration worst_delay{};
  for (const auto due : all) {  // in time order, as the probe loops reach their due times
    const auto start = pacer.admit(due);
    ASSERT_GE(start, due);
    worst_delay = std::max(worst_delay, start - due);
    started.push_back(start);
  }
  std::size_t most = 0;
  for (auto b = started.begin(); b != started.end(); ++b)
    most = std::max(most, static_cast<std::size_t>(std::lower_bound(b, started.end(), *b + 100ms) - b));
  EXPECT_LE(most, 5u);
  // Deferral flattens bursts without starving anyone: well under one interval.
  EXPECT_LT(worst_delay, 500ms);
  RecordProperty("worst_delay_us",
                 static_cast<int>(std::chrono::duration_cast<std::chrono::microseconds>(worst_delay).count()));
}

TEST(HealthProbePacer, DefersTheOneTooManyUntilTheOldestLeavesTheWindow) {
  ProbePacer p(100ms, 2);
  EXPECT_EQ(p.admit(t0), t0);
  EXPECT_EQ(p.admit(t0 + 10ms), t0 + 10ms);
  EXPECT_EQ(p.admit(t0 + 20ms), t0 + 100ms);  // third in (t0 - 100ms, t0 + 20ms]: wait for t0 to leave
  EXPECT_EQ(p.admit(t0 + 300ms), t0 + 300ms);
}

}  // namespace
}  // namespace sluice::health

namespace sluice::health {
namespace {

TEST(HealthProbeGrid, AlignUpRoundsToTheNextGridStepAndKeepsExactSteps) {
  using std::chrono::milliseconds;
  const auto at = [](auto d) { return Clock::time_point(std::chrono::duration_cast<Clock::duration>(d)); };
  EXPECT_EQ(align_up(at(milliseconds(20)), probe_grid), at(milliseconds(20)));
  EXPECT_EQ(align_up(at(milliseconds(20) + std::chrono::nanoseconds(1)), probe_grid), at(milliseconds(30)));
  EXPECT_EQ(align_up(at(milliseconds(29)), probe_grid), at(milliseconds(30)));
  EXPECT_EQ(align_up(at(milliseconds(0)), probe_grid), at(milliseconds(0)));
  EXPECT_EQ(align_up(at(milliseconds(7)), Clock::duration::zero()), at(milliseconds(7)));
}

TEST(HealthProbeGrid, AThousandServersAtOneSecondWakeAtMostOnceAGridStep) {
  // The point of the grid: however many servers, the prober's distinct wake-up times per second
  // are bounded by 1 s / grid (100), not by the number of servers (1,000).
  std::set<Clock::time_point> wakes;
  for (std::uint64_t i = 0; i < 1000; ++i) {
    ProbeSchedule schedule(std::chrono::seconds(1), 0.1, ProbeSchedule::seed_for("s" + std::to_string(i), 7));
    auto due = schedule.first(Clock::time_point{});
    for (int k = 0; k < 3; ++k, due = schedule.next(due))
      if (due >= Clock::time_point(std::chrono::seconds(1)) && due < Clock::time_point(std::chrono::seconds(2)))
        wakes.insert(align_up(due, probe_grid));
  }
  EXPECT_LE(wakes.size(), 101u);
  EXPECT_GE(wakes.size(), 90u);  // ...and they still spread over the whole second
}

}  // namespace
}  // namespace sluice::health
