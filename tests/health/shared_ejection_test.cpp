// ServerHealth in fleet mode's shared ejections: its own ejections as the fleet sees them, and
// another instance's ejection applied here.
#include "sluice/health/server_health.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

namespace sluice::health {
namespace {

using namespace std::chrono_literals;

HealthPolicy passive_policy() {
  HealthPolicy p;
  p.passive = PassivePolicy{3, 10s, 300s};
  return p;
}

class SharedEjection : public ::testing::Test {
protected:
  ManualClock clock;
  Endpoint endpoint{"a", config::HostPort{"127.0.0.1", 8000}, {}, 1};
};

TEST_F(SharedEjection, OwnEjectionsAreCountedAndTheOneInPlaceIsReported) {
  ServerHealth h(endpoint, passive_policy(), nullptr, clock);
  EXPECT_EQ(h.own_ejection(0).ejections, 0u);
  for (int i = 0; i < 3; ++i) h.live_failure(Failure::answered(502));
  const auto own = h.own_ejection(0);
  EXPECT_EQ(own.ejections, 1u);
  EXPECT_TRUE(own.ejected);
  EXPECT_EQ(own.until, clock.now() + 10s);
  EXPECT_NE(own.reason.find("3 failures in 10s: 502"), std::string::npos) << own.reason;
  EXPECT_FALSE(h.own_ejection(1).ejected) << "already known: nothing to report";
}

TEST_F(SharedEjection, AnotherInstancesEjectionAppliesUntilItsEndThenHalfOpen) {
  ServerHealth h(endpoint, passive_policy(), nullptr, clock);
  const auto t = h.shared_ejection(clock.now() + 4s, "by lb-1 through the fleet: 3 failures");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->event, HealthEvent::ejected);
  EXPECT_EQ(endpoint.state(), ServerState::ejected);
  EXPECT_EQ(h.own_ejection(0).ejections, 0u) << "not this instance's: not published again";
  EXPECT_EQ(h.status().ejection_level, 0u) << "the back-off level is the ejecting instance's";
  EXPECT_FALSE(h.shared_ejection(clock.now() + 2s, "shorter")) << "an ejection is only lengthened";
  clock.advance(3999ms);
  EXPECT_FALSE(h.tick());
  EXPECT_EQ(endpoint.state(), ServerState::ejected);
  clock.advance(1ms);
  const auto end = h.tick();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->event, HealthEvent::half_open);
  EXPECT_EQ(endpoint.state(), ServerState::up);
}

TEST_F(SharedEjection, WithoutPassiveChecksHereOrPastItsEndNothingIsEjected) {
  ServerHealth off(endpoint, HealthPolicy{}, nullptr, clock);
  EXPECT_FALSE(off.shared_ejection(clock.now() + 4s, "x"));
  EXPECT_EQ(endpoint.state(), ServerState::up);
  ServerHealth on(endpoint, passive_policy(), nullptr, clock);
  EXPECT_FALSE(on.shared_ejection(clock.now(), "x"));
  EXPECT_EQ(endpoint.state(), ServerState::up);
}

TEST_F(SharedEjection, MaxEjectedPercentHoldsForSharedEjectionsToo) {
  auto guard = std::make_shared<EjectionGuard>(2, 50);
  Endpoint other{"b", config::HostPort{"127.0.0.1", 8001}, {}, 1};
  ServerHealth a(endpoint, passive_policy(), guard, clock);
  ServerHealth b(other, passive_policy(), guard, clock);
  ASSERT_TRUE(a.shared_ejection(clock.now() + 4s, "x"));
  const auto refused = b.shared_ejection(clock.now() + 4s, "y");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->event, HealthEvent::ejection_refused);
  EXPECT_EQ(other.state(), ServerState::up);
  clock.advance(4s);
  a.tick();
  EXPECT_EQ(guard->ejected(), 0u) << "the slot is given back when the ejection ends";
}

}  // namespace
}  // namespace sluice::health
