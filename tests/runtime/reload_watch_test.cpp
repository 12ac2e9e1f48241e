// The reload watch's judgement on a manual clock: the failed share against the window before,
// the servers up per upstream, the minimum of answers, the verdict's words and figures. (The
// rollback itself, over real traffic, is integration/test_reload_watch.py.)
#include "sluice/runtime/reload_watch.hpp"

#include <gtest/gtest.h>

namespace sluice {
namespace {

using namespace std::chrono_literals;
using Kind = WatchVerdict::Kind;

config::ReloadSection settings(config::Duration watch = 30s) {
  config::ReloadSection r;
  r.watch = watch;
  return r;
}

struct Watch {
  ManualClock clock;
  ReloadWatch watch{clock};
  TrafficCount total;
  std::vector<UpstreamUp> up{{"app", 3, 3}};

  // `requests` answers, `failed` of them failed, spread over `d` in 500 ms ticks as the runtime
  // records them; the verdict of the last tick that gave one.
  std::optional<WatchVerdict> serve(std::uint64_t requests, std::uint64_t failed, Clock::duration d) {
    const auto ticks = static_cast<std::uint64_t>(d / 500ms);
    const TrafficCount base = total;
    std::optional<WatchVerdict> verdict;
    for (std::uint64_t t = 1; t <= ticks; ++t) {
      clock.advance(500ms);
      total.requests = base.requests + requests * t / ticks;
      total.failed = base.failed + failed * t / ticks;
      watch.record(total, 30s);
      if (auto v = watch.judge(up)) verdict = v;
    }
    return verdict;
  }
  void reload(config::ReloadSection s = settings()) {
    watch.record(total, s.watch);
    watch.begin(s, up);
  }
};

TEST(ReloadWatch, AFailingConfigIsRolledBackWithTheFigures) {
  Watch w;
  w.serve(3000, 3, 30s);  // before: 0.1 %
  w.reload();
  // 41.7 % of the answers fail: the breach is clear once min_requests (100) answered.
  const auto v = w.serve(1440, 600, 12s);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Kind::rolled_back);
  EXPECT_EQ(v->text, "rolled back: failed share 41.7 % (before 0.1 %) over 1 s");
  EXPECT_FALSE(w.watch.watching());
}

TEST(ReloadWatch, TheVerdictComesAsSoonAsMinRequestsAnsweredNotBefore) {
  Watch w;
  w.reload();
  // 50 answers a tick, all failing: 100 answered after the second tick.
  w.clock.advance(500ms);
  w.total = {50, 50};
  w.watch.record(w.total, 30s);
  EXPECT_FALSE(w.watch.judge(w.up));
  w.clock.advance(500ms);
  w.total = {100, 100};
  w.watch.record(w.total, 30s);
  const auto v = w.watch.judge(w.up);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->text, "rolled back: failed share 100.0 % (before 0.0 %) over 1 s");
}

TEST(ReloadWatch, AGoodConfigIsAppliedAtTheEndOfTheWatch) {
  Watch w;
  w.serve(3000, 3, 30s);
  w.reload();
  EXPECT_FALSE(w.serve(2900, 3, 29500ms));
  EXPECT_TRUE(w.watch.watching());
  const auto v = w.serve(100, 0, 500ms);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Kind::applied);
  EXPECT_EQ(v->text, "applied: failed share 0.1 % (before 0.1 %) over 30 s");
}

TEST(ReloadWatch, BothThresholdsMustBreach) {
  // 6 % failing is over failed_percent (5) but not 3x the 4 % before: applied.
  Watch a;
  a.serve(3000, 120, 30s);
  a.reload();
  auto v = a.serve(3000, 180, 30s);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Kind::applied) << v->text;
  // 4 % failing is 40x the 0.1 % before but under failed_percent: applied.
  Watch b;
  b.serve(3000, 3, 30s);
  b.reload();
  v = b.serve(3000, 120, 30s);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Kind::applied) << v->text;
  // 5 % exactly is a breach (">= 5 %").
  Watch c;
  c.reload();
  v = c.serve(1000, 50, 10s);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Kind::rolled_back) << v->text;
}

TEST(ReloadWatch, TooLittleTrafficStaysAndSaysSo) {
  Watch w;
  w.reload();
  const auto v = w.serve(60, 60, 30s);  // every answer failed, but only 60 of them
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Kind::too_little_traffic);
  EXPECT_EQ(v->text, "applied: too little traffic to judge (60 answers over 30 s, 100 needed)");
}

TEST(ReloadWatch, AnUpstreamLosingMoreThanHalfOfItsServersUpIsRolledBack) {
  Watch w;
  w.reload();
  w.up = {{"app", 2, 3}};  // 3 of 3 -> 2 of 3: not more than half lost
  EXPECT_FALSE(w.serve(0, 0, 5s));
  w.up = {{"app", 1, 3}};
  const auto v = w.serve(0, 0, 500ms);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Kind::rolled_back);
  EXPECT_EQ(v->text, "rolled back: upstream app: 1 of 3 servers up (before 3 of 3) after 5.5 s");
}

TEST(ReloadWatch, ExactlyHalfIsNotMoreThanHalf) {
  Watch w;
  w.up = {{"app", 2, 2}, {"new", 0, 0}};
  w.reload();
  w.up = {{"app", 1, 2}, {"new", 0, 2}};  // a new upstream has nothing to lose
  const auto v = w.serve(0, 0, 30s);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Kind::too_little_traffic) << v->text;
}

TEST(ReloadWatch, TheThresholdsAreSettings) {
  Watch w;
  auto s = settings(10s);
  s.min_requests = 10;
  s.failed_percent = 50;
  s.failed_factor = 1;
  s.up_lost_percent = 100;
  w.reload(s);
  w.up = {{"app", 0, 3}};  // losing all is not more than 100 %
  EXPECT_FALSE(w.serve(20, 8, 2s));  // 40 %: under 50 %
  const auto v = w.serve(20, 20, 1s);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->text, "rolled back: failed share 60.0 % (before 0.0 %) over 2.5 s");
}

TEST(ReloadWatch, TheWindowBeforeIsAsLongAsTheWatch) {
  Watch w;
  w.serve(1000, 1000, 10s);  // long ago: all failing
  w.serve(3000, 30, 30s);   // the last 30 s: 1 %
  w.reload();
  // 4 % is under 3 x 1 %: the old failures are outside the window and do not raise the bar.
  auto v = w.serve(3000, 120, 30s);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Kind::applied) << v->text;
  EXPECT_EQ(v->text, "applied: failed share 4.0 % (before 1.0 %) over 30 s");
}

TEST(ReloadWatch, WatchZeroAndCancelGiveNoVerdict) {
  Watch w;
  w.reload(settings(0s));
  EXPECT_FALSE(w.watch.watching());
  EXPECT_FALSE(w.serve(1000, 1000, 5s));
  w.reload();
  w.watch.cancel();
  EXPECT_FALSE(w.serve(1000, 1000, 5s));
}

TEST(ReloadWatch, FingerprintIsTheTextsVersion) {
  EXPECT_EQ(config_fingerprint("a"), config_fingerprint("a"));
  EXPECT_NE(config_fingerprint("a"), config_fingerprint("a "));
  EXPECT_EQ(config_fingerprint("").size(), 16u);
}

}  // namespace
}  // namespace sluice
