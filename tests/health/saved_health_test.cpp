// ServerHealth::saved() / restore(): what a state file carries of a server into a new process.
#include "sluice/health/server_health.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace sluice::health {
namespace {

using namespace std::chrono_literals;

HealthPolicy policy(Clock::duration slow_start = 0s) {
  HealthPolicy p;
  p.active = ActivePolicy{2, 3, true};
  p.passive = PassivePolicy{3, 10s, 300s};
  p.slow_start = slow_start;
  return p;
}

class SavedHealthTest : public ::testing::Test {
protected:
  ManualClock clock;
  Endpoint before{"a", config::HostPort{"127.0.0.1", 8000}, {}, 1};
  Endpoint after{"a", config::HostPort{"127.0.0.1", 8000}, {}, 1};
};

TEST_F(SavedHealthTest, DownByProbesStartsDownAndNeedsRisePasses) {
  ServerHealth old(before, policy(), nullptr, clock);
  for (int i = 0; i < 3; ++i) old.probe_result({false, "connect refused", 1ms});
  ASSERT_EQ(before.state(), ServerState::down);
  const auto saved = old.saved();
  EXPECT_EQ(saved.active_up, false);

  ServerHealth h(after, policy(), nullptr, clock);
  ASSERT_EQ(after.state(), ServerState::up);  // initial_state = "up"
  h.restore(saved);
  EXPECT_EQ(after.state(), ServerState::down);
  EXPECT_EQ(h.status().reason, "restored: saved at the last stop or handed over by an upgrade");
  h.probe_result({true, "", 1ms});
  EXPECT_EQ(after.state(), ServerState::down);  // rise = 2
  h.probe_result({true, "", 1ms});
  EXPECT_EQ(after.state(), ServerState::up);
}

TEST_F(SavedHealthTest, EjectionResumesForTheTimeItHadLeft) {
  ServerHealth old(before, policy(), nullptr, clock);
  for (int i = 0; i < 3; ++i) old.live_failure(Failure::answered(502));
  ASSERT_EQ(before.state(), ServerState::ejected);  // level 1: 10 s
  clock.advance(4s);
  const auto saved = old.saved();
  EXPECT_EQ(saved.ejection_level, 1u);
  EXPECT_EQ(saved.ejected_for, 6s);

  ServerHealth h(after, policy(), nullptr, clock);
  h.restore(saved);
  EXPECT_EQ(after.state(), ServerState::ejected);
  clock.advance(5999ms);
  h.tick();
  EXPECT_EQ(after.state(), ServerState::ejected);
  clock.advance(1ms);
  h.tick();
  EXPECT_EQ(h.status().passive_phase, Ejection::Phase::half_open);
  // The back-off level came along: a failed trial ejects for 20 s, not 10 s.
  h.live_failure(Failure::answered(502));
  EXPECT_EQ(h.status().ejection_level, 2u);
  EXPECT_EQ(h.status().ejected_until, clock.now() + 20s);
}

TEST_F(SavedHealthTest, EjectionRespectsMaxEjectedPercent) {
  ServerHealth old(before, policy(), nullptr, clock);
  for (int i = 0; i < 3; ++i) old.live_failure(Failure::answered(502));
  auto guard = std::make_shared<EjectionGuard>(2, 0);  // max_ejected_percent = 0: none
  ServerHealth h(after, policy(), guard, clock);
  h.restore(old.saved());
  EXPECT_EQ(after.state(), ServerState::up);
}

TEST_F(SavedHealthTest, SlowStartResumesWhereItWas) {
  ServerHealth old(before, policy(10s), nullptr, clock);
  for (int i = 0; i < 3; ++i) old.probe_result({false, "timeout", 1ms});
  old.probe_result({true, "", 1ms});
  old.probe_result({true, "", 1ms});
  ASSERT_EQ(before.state(), ServerState::slow_start);
  clock.advance(5s);
  const auto saved = old.saved();
  ASSERT_TRUE(saved.slow_start_elapsed);
  EXPECT_EQ(*saved.slow_start_elapsed, 5s);

  ServerHealth h(after, policy(10s), nullptr, clock);
  h.restore(saved);
  EXPECT_EQ(after.state(), ServerState::slow_start);
  EXPECT_EQ(after.weight_share(), 500u);  // halfway along the ramp, as it was
  clock.advance(5s);
  h.tick();
  EXPECT_EQ(after.state(), ServerState::up);
}

TEST_F(SavedHealthTest, NothingSavedLeavesTheServerAsConfigured) {
  ServerHealth h(after, policy(), nullptr, clock);
  h.restore(SavedHealth{});
  EXPECT_EQ(after.state(), ServerState::up);
  EXPECT_EQ(h.status().reason, "initial state up");
}

}  // namespace
}  // namespace sluice::health
