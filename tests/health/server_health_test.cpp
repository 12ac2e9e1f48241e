#include "sluice/health/server_health.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace sluice::health {
namespace {

using namespace std::chrono_literals;

Endpoint make_endpoint(const std::string& name) {
  return Endpoint(name, config::HostPort{"127.0.0.1", 8000}, {}, 1);
}

ProbeResult pass() { return ProbeResult{true, "", 3ms}; }
ProbeResult fail(std::string why = "connect refused") { return ProbeResult{false, std::move(why), 1s}; }

HealthPolicy active_only(bool initially_up = true) {
  HealthPolicy p;
  p.active = ActivePolicy{2, 3, initially_up};
  return p;
}

HealthPolicy passive_only(Clock::duration slow_start = 0s) {
  HealthPolicy p;
  p.passive = PassivePolicy{3, 10s, 300s};
  p.slow_start = slow_start;
  return p;
}

HealthPolicy both() {
  HealthPolicy p = passive_only();
  p.active = ActivePolicy{2, 3, true};
  return p;
}

class HealthServer : public ::testing::Test {
protected:
  ManualClock clock;
  Endpoint endpoint = make_endpoint("a");

  // Three 502s one second apart: enough to eject with max_fails = 3 / fail_timeout = 10 s.
  std::optional<Transition> fail_live(ServerHealth& h, int n = 3, unsigned status = 502) {
    std::optional<Transition> last;
    for (int i = 0; i < n; ++i) {
      if (i != 0) clock.advance(1s);
      last = h.live_failure(Failure::answered(status));
    }
    return last;
  }
};

TEST_F(HealthServer, AServerUpFromTheStartSaysItsProbesPassOnceOneHas) {
  ServerHealth h(endpoint, active_only(), nullptr, clock);
  EXPECT_EQ(h.status().reason, "initial state up");
  EXPECT_FALSE(h.probe_result(fail()));
  EXPECT_EQ(h.status().reason, "initial state up") << "one failure is not a verdict";
  EXPECT_FALSE(h.probe_result(pass()));
  EXPECT_EQ(h.status().reason, "probes passing");
  EXPECT_EQ(endpoint.state(), ServerState::up);
}

TEST_F(HealthServer, ActiveChecksGoDownAndComeUpWithReasons) {
  ServerHealth h(endpoint, active_only(), nullptr, clock);
  EXPECT_EQ(endpoint.state(), ServerState::up);
  EXPECT_EQ(h.status().reason, "initial state up");
  EXPECT_FALSE(h.probe_result(fail()));
  EXPECT_FALSE(h.probe_result(fail()));
  const auto down = h.probe_result(fail());
  ASSERT_TRUE(down);
  EXPECT_EQ(down->event, HealthEvent::went_down);
  EXPECT_EQ(down->from, ServerState::up);
  EXPECT_EQ(down->to, ServerState::down);
  EXPECT_EQ(down->reason, "3 consecutive probe failures: connect refused");
  EXPECT_EQ(down->at, clock.now());
  EXPECT_EQ(endpoint.state(), ServerState::down);
  EXPECT_FALSE(endpoint.available());

  clock.advance(2s);
  EXPECT_FALSE(h.probe_result(pass()));
  const auto up = h.probe_result(pass());
  ASSERT_TRUE(up);
  EXPECT_EQ(up->event, HealthEvent::came_up);
  EXPECT_EQ(up->to, ServerState::up);
  EXPECT_EQ(up->reason, "probe passed 2/2");
  EXPECT_TRUE(endpoint.available());

  const auto s = h.status();
  EXPECT_EQ(s.state, ServerState::up);
  EXPECT_EQ(s.reason, "probe passed 2/2");
  EXPECT_EQ(s.since, clock.now());
  EXPECT_EQ(s.consecutive_passes, 2u);
  EXPECT_EQ(s.health_counter, 4u);
  EXPECT_EQ(s.health_max, 4u);
  ASSERT_TRUE(s.last_probe);
  EXPECT_TRUE(s.last_probe->passed);
  EXPECT_EQ(s.last_probe->latency, 3ms);
  EXPECT_EQ(s.last_probe->at, clock.now());
}

TEST_F(HealthServer, FlappingProbesNeverChangeState) {
  ServerHealth h(endpoint, active_only(), nullptr, clock);
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(h.probe_result(i % 2 ? pass() : fail()));
    EXPECT_EQ(endpoint.state(), ServerState::up);
  }
}

TEST_F(HealthServer, FallOfOneSaysOneFailure) {
  HealthPolicy p;
  p.active = ActivePolicy{1, 1, true};
  ServerHealth h(endpoint, p, nullptr, clock);
  EXPECT_EQ(h.probe_result(fail("status 500 not in 200-399"))->reason,
            "1 probe failure: status 500 not in 200-399");
}

TEST_F(HealthServer, InitialStateDownWaitsForRisePasses) {
  ServerHealth h(endpoint, active_only(false), nullptr, clock);
  EXPECT_EQ(endpoint.state(), ServerState::down);
  EXPECT_EQ(h.status().reason, "initial state down: waiting for 2 passing probes");
  EXPECT_FALSE(h.probe_result(pass()));
  EXPECT_EQ(h.probe_result(pass())->event, HealthEvent::came_up);
  EXPECT_EQ(endpoint.state(), ServerState::up);
}

TEST_F(HealthServer, ASingleServerPoolIsMarkedDownLikeAnyOther) {
  auto guard = std::make_shared<EjectionGuard>(1, 50);
  ServerHealth h(endpoint, both(), guard, clock);
  h.probe_result(fail());
  h.probe_result(fail());
  EXPECT_EQ(h.probe_result(fail())->to, ServerState::down);
}

TEST_F(HealthServer, PassiveFailuresWithinTheWindowEject) {
  ServerHealth h(endpoint, passive_only(), nullptr, clock);
  EXPECT_EQ(h.live_failure(Failure::answered(502))->event, HealthEvent::failure_noted);
  clock.advance(5s);
  EXPECT_FALSE(h.live_failure(Failure::answered(502)));
  clock.advance(5s);
  const auto t = h.live_failure(Failure::answered(502));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->event, HealthEvent::ejected);
  EXPECT_EQ(t->from, ServerState::up);
  EXPECT_EQ(t->to, ServerState::ejected);
  EXPECT_EQ(t->reason, "3 failures in 10s: 502; ejected for 10s");
  EXPECT_EQ(endpoint.state(), ServerState::ejected);
  EXPECT_FALSE(endpoint.available());
  EXPECT_EQ(h.next_deadline(), clock.now() + 10s);
}

TEST_F(HealthServer, PassiveFailuresSpreadOverElevenSecondsDoNot) {
  ServerHealth h(endpoint, passive_only(), nullptr, clock);
  EXPECT_EQ(h.live_failure(Failure::of(FailureKind::connect_refused))->event,
            HealthEvent::failure_noted);
  clock.advance(5500ms);
  EXPECT_FALSE(h.live_failure(Failure::of(FailureKind::connect_refused)));
  clock.advance(5500ms);
  EXPECT_FALSE(h.live_failure(Failure::of(FailureKind::connect_refused)));
  EXPECT_EQ(endpoint.state(), ServerState::up);
  EXPECT_EQ(h.status().recent_failures, 2u);
  clock.advance(4s);
  EXPECT_EQ(h.live_failure(Failure::of(FailureKind::connect_refused))->reason,
            "3 failures in 10s: connect refused; ejected for 10s");
}

TEST_F(HealthServer, SuccessesDoNotResetTheWindow) {
  ServerHealth h(endpoint, passive_only(), nullptr, clock);
  h.live_failure(Failure::of(FailureKind::response_timeout));
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(h.live_success());
  h.live_failure(Failure::of(FailureKind::response_timeout));
  EXPECT_EQ(h.live_failure(Failure::of(FailureKind::response_timeout))->event, HealthEvent::ejected);
}

TEST_F(HealthServer, HalfOpenRequestSuccessRestores) {
  ServerHealth h(endpoint, passive_only(), nullptr, clock);
  fail_live(h);
  clock.advance(9999ms);
  EXPECT_FALSE(h.tick());
  EXPECT_EQ(endpoint.state(), ServerState::ejected);
  clock.advance(1ms);
  const auto half = h.tick();
  ASSERT_TRUE(half);
  EXPECT_EQ(half->event, HealthEvent::half_open);
  EXPECT_EQ(half->from, ServerState::ejected);
  EXPECT_EQ(half->to, ServerState::up);
  EXPECT_EQ(half->reason, "ejection expired: half-open");
  EXPECT_TRUE(endpoint.available());
  EXPECT_EQ(h.status().passive_phase, Ejection::Phase::half_open);

  const auto ok = h.live_success();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->event, HealthEvent::recovered);
  EXPECT_EQ(ok->from, ServerState::up);
  EXPECT_EQ(ok->to, ServerState::up);
  EXPECT_EQ(ok->reason, "half-open request succeeded");
  EXPECT_EQ(h.status().passive_phase, Ejection::Phase::serving);
  EXPECT_FALSE(h.live_success());  // back on the lock-free path
  EXPECT_EQ(h.next_deadline(), Clock::time_point::max());
}

TEST_F(HealthServer, HalfOpenFailureReejectsWithDoubledTimeUpToTheCap) {
  ServerHealth h(endpoint, passive_only(), nullptr, clock);
  EXPECT_EQ(fail_live(h)->reason, "3 failures in 10s: 502; ejected for 10s");
  std::vector<std::string> reasons;
  for (int i = 0; i < 6; ++i) {
    clock.set(h.next_deadline());
    ASSERT_EQ(h.tick()->event, HealthEvent::half_open);
    const auto t = h.live_failure(Failure::answered(503));  // one request decides
    ASSERT_TRUE(t);
    EXPECT_EQ(t->event, HealthEvent::reejected);
    EXPECT_EQ(t->from, ServerState::up);
    EXPECT_EQ(t->to, ServerState::ejected);
    reasons.push_back(t->reason);
  }
  const std::vector<std::string> want{
      "half-open request failed: 503; ejected for 20s (ejection 2 in a row)",
      "half-open request failed: 503; ejected for 40s (ejection 3 in a row)",
      "half-open request failed: 503; ejected for 80s (ejection 4 in a row)",
      "half-open request failed: 503; ejected for 160s (ejection 5 in a row)",
      "half-open request failed: 503; ejected for 5m (ejection 6 in a row)",
      "half-open request failed: 503; ejected for 5m (ejection 7 in a row)",
  };
  EXPECT_EQ(reasons, want);
  EXPECT_EQ(h.next_deadline(), clock.now() + 300s);
  EXPECT_EQ(h.status().ejections, 7u);
}

TEST_F(HealthServer, LateResultsWhileEjectedAreIgnored) {
  ServerHealth h(endpoint, passive_only(), nullptr, clock);
  fail_live(h);
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(h.live_failure(Failure::of(FailureKind::reset_after_send)));
    EXPECT_FALSE(h.live_success());
  }
  clock.advance(10s);
  h.tick();
  EXPECT_EQ(h.status().recent_failures, 0u);
  // The trial is decided by the next result, not by leftovers.
  EXPECT_EQ(h.live_success()->event, HealthEvent::recovered);
}

TEST_F(HealthServer, RisePassingProbesEndAnEjectionAndItsBackoff) {
  ServerHealth h(endpoint, both(), nullptr, clock);
  fail_live(h);
  EXPECT_FALSE(h.probe_result(pass()));  // one pass is not `rise`
  EXPECT_EQ(endpoint.state(), ServerState::ejected);
  const auto back = h.probe_result(pass());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->event, HealthEvent::recovered);
  EXPECT_EQ(back->reason, "probe passed 2/2: ejection ended by active checks");
  EXPECT_EQ(endpoint.state(), ServerState::up);
  EXPECT_EQ(h.status().ejection_level, 0u);
  // The back-off starts again from the first level.
  clock.advance(1s);
  EXPECT_EQ(fail_live(h)->reason, "3 failures in 10s: 502; ejected for 10s");
}

TEST_F(HealthServer, HalfOpenDecidedByTheNextProbe) {
  ServerHealth h(endpoint, both(), nullptr, clock);
  fail_live(h);
  clock.advance(10s);
  h.tick();
  const auto ok = h.probe_result(pass());
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->event, HealthEvent::recovered);
  EXPECT_EQ(ok->reason, "half-open probe passed");

  clock.advance(1s);
  EXPECT_EQ(fail_live(h)->reason, "3 failures in 10s: 502; ejected for 20s (ejection 2 in a row)");
  clock.advance(20s);
  h.tick();
  const auto bad = h.probe_result(fail("timeout after 1s"));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->event, HealthEvent::reejected);
  EXPECT_EQ(bad->reason, "half-open probe failed: timeout after 1s; ejected for 40s (ejection 3 in a row)");
  EXPECT_EQ(endpoint.state(), ServerState::ejected);
}

TEST_F(HealthServer, BackoffStartsOverAfterALongHealthyRun) {
  ServerHealth h(endpoint, passive_only(), nullptr, clock);
  fail_live(h);
  clock.advance(10s);
  h.tick();
  h.live_success();
  clock.advance(1min);
  EXPECT_EQ(fail_live(h)->reason, "3 failures in 10s: 502; ejected for 20s (ejection 2 in a row)");
  clock.advance(20s);
  h.tick();
  h.live_success();
  clock.advance(300s);
  EXPECT_EQ(fail_live(h)->reason, "3 failures in 10s: 502; ejected for 10s");
}

TEST_F(HealthServer, LiveResultsAreIgnoredWhileDown) {
  ServerHealth h(endpoint, both(), nullptr, clock);
  for (int i = 0; i < 3; ++i) h.probe_result(fail());
  ASSERT_EQ(endpoint.state(), ServerState::down);
  EXPECT_FALSE(fail_live(h, 10));
  EXPECT_EQ(h.status().ejections, 0u);
}

TEST_F(HealthServer, DownOutranksEjectedAndEndsTheEjection) {
  ServerHealth h(endpoint, both(), nullptr, clock);
  fail_live(h);
  h.probe_result(fail());
  h.probe_result(fail());
  const auto t = h.probe_result(fail());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->from, ServerState::ejected);
  EXPECT_EQ(t->to, ServerState::down);
  EXPECT_EQ(h.status().passive_phase, Ejection::Phase::serving);  // active checks rule now
  // Nothing runs out underneath, and no trial is pending while down.
  clock.advance(10s);
  EXPECT_FALSE(h.tick());
  EXPECT_FALSE(h.live_success());
  // Back after `rise` passes, however long it was down.
  clock.advance(5min);
  EXPECT_FALSE(h.probe_result(pass()));
  EXPECT_EQ(h.probe_result(pass())->event, HealthEvent::came_up);
  EXPECT_EQ(endpoint.state(), ServerState::up);
  // The time spent down did not double the next ejection.
  EXPECT_EQ(fail_live(h)->reason, "3 failures in 10s: 502; ejected for 10s");
}

TEST_F(HealthServer, SlowStartRampsAfterComingUp) {
  HealthPolicy p = active_only(false);
  p.slow_start = 30s;
  ServerHealth h(endpoint, p, nullptr, clock);
  h.probe_result(pass());
  const auto up = h.probe_result(pass());
  ASSERT_TRUE(up);
  EXPECT_EQ(up->to, ServerState::slow_start);
  EXPECT_TRUE(endpoint.available());
  EXPECT_EQ(endpoint.weight_share(), 100u);
  EXPECT_EQ(h.next_deadline(), clock.now() + 300ms);

  clock.advance(15s);
  EXPECT_FALSE(h.tick());
  EXPECT_EQ(endpoint.weight_share(), 500u);
  EXPECT_EQ(endpoint.effective_weight_milli(), 500u);

  clock.advance(15s);
  const auto done = h.tick();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->event, HealthEvent::slow_start_done);
  EXPECT_EQ(done->from, ServerState::slow_start);
  EXPECT_EQ(done->to, ServerState::up);
  EXPECT_EQ(done->reason, "slow start complete after 30s");
  EXPECT_EQ(endpoint.weight_share(), 1000u);
  EXPECT_EQ(h.next_deadline(), Clock::time_point::max());
}

TEST_F(HealthServer, NoSlowStartAtStartUp) {
  HealthPolicy p = passive_only(30s);
  ServerHealth h(endpoint, p, nullptr, clock);
  EXPECT_EQ(endpoint.state(), ServerState::up);
  EXPECT_EQ(endpoint.weight_share(), 1000u);
}

TEST_F(HealthServer, HalfOpenTrialStartsAtTheFloorShare) {
  ServerHealth h(endpoint, passive_only(20s), nullptr, clock);
  fail_live(h);
  EXPECT_EQ(endpoint.state(), ServerState::ejected);
  clock.advance(10s);
  const auto half = h.tick();
  EXPECT_EQ(half->to, ServerState::slow_start);
  EXPECT_EQ(endpoint.weight_share(), 100u);
  clock.advance(10s);
  EXPECT_EQ(h.live_success()->to, ServerState::slow_start);  // recovered, still ramping
  h.tick();
  EXPECT_EQ(endpoint.weight_share(), 500u);
  // Ejected mid-ramp, back later: the ramp starts over.
  clock.advance(1s);
  fail_live(h);
  clock.set(h.next_deadline());
  h.tick();
  EXPECT_EQ(endpoint.weight_share(), 100u);
}

// max_ejected_percent = 50 with every server of the pool failing at once.
std::vector<HealthEvent> eject_all(std::size_t pool, ManualClock& clock) {
  auto guard = std::make_shared<EjectionGuard>(static_cast<std::uint32_t>(pool), 50);
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  std::vector<std::unique_ptr<ServerHealth>> servers;
  for (std::size_t i = 0; i < pool; ++i) {
    endpoints.push_back(std::make_unique<Endpoint>("s" + std::to_string(i),
                                                   config::HostPort{"127.0.0.1", 8000},
                                                   boost::asio::ip::tcp::endpoint{}, 1));
    servers.push_back(std::make_unique<ServerHealth>(*endpoints.back(), passive_only(), guard, clock));
  }
  std::vector<HealthEvent> events;
  for (auto& s : servers) {
    s->live_failure(Failure::answered(502));
    s->live_failure(Failure::answered(502));
    events.push_back(s->live_failure(Failure::answered(502))->event);
  }
  std::size_t available = 0;
  for (auto& e : endpoints) available += e->available() ? 1 : 0;
  EXPECT_EQ(available, pool - guard->ejected());
  EXPECT_EQ(guard->refusals() + guard->ejected(), pool);
  return events;
}

TEST_F(HealthServer, MaxEjectedPercentWithPoolsOfOneTwoThreeAndTen) {
  using E = HealthEvent;
  EXPECT_EQ(eject_all(1, clock), (std::vector<E>{E::ejection_refused}));
  EXPECT_EQ(eject_all(2, clock), (std::vector<E>{E::ejected, E::ejection_refused}));
  EXPECT_EQ(eject_all(3, clock), (std::vector<E>{E::ejected, E::ejection_refused, E::ejection_refused}));
  const auto ten = eject_all(10, clock);
  EXPECT_EQ(std::count(ten.begin(), ten.end(), E::ejected), 5);
  EXPECT_EQ(std::count(ten.begin(), ten.end(), E::ejection_refused), 5);
  EXPECT_EQ(ten[4], E::ejected);
  EXPECT_EQ(ten[5], E::ejection_refused);
}

TEST_F(HealthServer, RefusalIsReportedAndTheServerStaysIn) {
  auto guard = std::make_shared<EjectionGuard>(1, 50);
  ServerHealth h(endpoint, passive_only(), guard, clock);
  const auto t = fail_live(h);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->event, HealthEvent::ejection_refused);
  EXPECT_EQ(t->from, ServerState::up);
  EXPECT_EQ(t->to, ServerState::up);
  EXPECT_EQ(t->reason,
            "ejection refused: 1 of 1 servers would be ejected (max_ejected_percent 50); "
            "3 failures in 10s: 502");
  EXPECT_TRUE(endpoint.available());
  EXPECT_EQ(guard->refusals(), 1u);
  // Still failing: every further failure that finds the window full is refused (and counted).
  EXPECT_EQ(h.live_failure(Failure::answered(502))->event, HealthEvent::ejection_refused);
  EXPECT_EQ(guard->refusals(), 2u);
}

TEST_F(HealthServer, AServerDownByProbesCountsAgainstMaxEjectedPercent) {
  // Three servers, 50 %: one may be out. With `a` down by probes, `b`'s failures cannot take it
  // out too (the chaos test's case: app-3 down, app-1 draining, app-2 failing now and then).
  auto guard = std::make_shared<EjectionGuard>(3, 50);
  Endpoint other = make_endpoint("b");
  ServerHealth a(endpoint, both(), guard, clock);
  ServerHealth b(other, both(), guard, clock);
  a.probe_result(fail());
  a.probe_result(fail());
  EXPECT_EQ(a.probe_result(fail())->event, HealthEvent::went_down);
  EXPECT_EQ(guard->ejected(), 1u);
  EXPECT_EQ(fail_live(b)->event, HealthEvent::ejection_refused);
  EXPECT_TRUE(other.available());
  // Back up: the slot is free again, and b's next run of failures ejects it.
  EXPECT_FALSE(a.probe_result(pass()));
  EXPECT_EQ(a.probe_result(pass())->event, HealthEvent::came_up);  // rise = 2
  EXPECT_EQ(guard->ejected(), 0u);
  clock.advance(1h);  // a fresh passive window
  EXPECT_EQ(fail_live(b)->event, HealthEvent::ejected);
}

TEST_F(HealthServer, GoingDownIsNeverLimitedByMaxEjectedPercent) {
  auto guard = std::make_shared<EjectionGuard>(2, 50);
  Endpoint other = make_endpoint("b");
  ServerHealth a(endpoint, both(), guard, clock);
  ServerHealth b(other, both(), guard, clock);
  EXPECT_EQ(fail_live(a)->event, HealthEvent::ejected);  // the only slot
  for (int i = 0; i < 3; ++i) b.probe_result(fail());
  EXPECT_EQ(other.state(), ServerState::down);
  EXPECT_EQ(guard->ejected(), 2u);
}

TEST_F(HealthServer, SlotsComeBackWhenEjectionsExpire) {
  auto guard = std::make_shared<EjectionGuard>(2, 50);
  Endpoint other = make_endpoint("b");
  ServerHealth a(endpoint, passive_only(), guard, clock);
  ServerHealth b(other, passive_only(), guard, clock);
  EXPECT_EQ(fail_live(a)->event, HealthEvent::ejected);
  EXPECT_EQ(fail_live(b)->event, HealthEvent::ejection_refused);
  clock.set(a.next_deadline());
  a.tick();  // a is half-open: back in service, slot released
  EXPECT_EQ(guard->ejected(), 0u);
  EXPECT_EQ(b.live_failure(Failure::answered(502))->event, HealthEvent::ejected);
  // a's trial fails, but b holds the only slot now.
  const auto t = a.live_failure(Failure::answered(502));
  EXPECT_EQ(t->event, HealthEvent::ejection_refused);
  EXPECT_EQ(a.status().passive_phase, Ejection::Phase::serving);
}

TEST_F(HealthServer, DestroyingAnEjectedServerGivesItsSlotBack) {
  auto guard = std::make_shared<EjectionGuard>(2, 50);
  {
    ServerHealth h(endpoint, passive_only(), guard, clock);
    fail_live(h);
    EXPECT_EQ(guard->ejected(), 1u);
  }
  EXPECT_EQ(guard->ejected(), 0u);
}

TEST_F(HealthServer, ReconfigureKeepsVerdictsAndMovesTheSlot) {
  auto old_guard = std::make_shared<EjectionGuard>(2, 50);
  ServerHealth h(endpoint, both(), old_guard, clock);
  fail_live(h);
  auto new_guard = std::make_shared<EjectionGuard>(4, 50);
  HealthPolicy p = both();
  p.active = ActivePolicy{5, 5, true};
  h.reconfigure(p, new_guard);
  EXPECT_EQ(old_guard->ejected(), 0u);
  EXPECT_EQ(new_guard->ejected(), 1u);
  EXPECT_EQ(endpoint.state(), ServerState::ejected);
  EXPECT_EQ(h.status().health_counter, 9u);  // still fully up, under the new rise/fall
  clock.advance(10s);
  h.tick();
  EXPECT_EQ(new_guard->ejected(), 0u);
}

TEST_F(HealthServer, TurningPassiveChecksOffEndsAnEjection) {
  auto guard = std::make_shared<EjectionGuard>(2, 50);
  ServerHealth h(endpoint, passive_only(), guard, clock);
  fail_live(h);
  h.reconfigure(HealthPolicy{}, guard);
  EXPECT_EQ(endpoint.state(), ServerState::up);
  EXPECT_EQ(guard->ejected(), 0u);
  EXPECT_FALSE(fail_live(h, 10));
}

TEST_F(HealthServer, WorkersReportingConcurrentlyKeepTheInvariants) {
  auto guard = std::make_shared<EjectionGuard>(4, 50);
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  std::vector<std::unique_ptr<ServerHealth>> servers;
  for (int i = 0; i < 4; ++i) {
    endpoints.push_back(std::make_unique<Endpoint>("w" + std::to_string(i),
                                                   config::HostPort{"127.0.0.1", 8000},
                                                   boost::asio::ip::tcp::endpoint{}, 1));
    servers.push_back(std::make_unique<ServerHealth>(*endpoints.back(), passive_only(), guard, clock));
  }
  const auto count_ejected = [&] {
    unsigned n = 0;
    for (auto& e : endpoints) n += e->state() == ServerState::ejected ? 1 : 0;
    return n;
  };

  std::atomic<bool> stop{false};
  std::atomic<unsigned> started{0};
  std::atomic<unsigned> transitions{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&, w] {
      started.fetch_add(1);
      for (unsigned i = 0; !stop.load(); ++i) {
        auto& s = *servers[(i + w) % servers.size()];
        const auto t = (i % 3 == 0) ? s.live_failure(Failure::answered(502)) : s.live_success();
        if (t) transitions.fetch_add(1);
      }
    });
  }
  // The control thread: moves time and ticks. Workers only ever add ejections, within the guard.
  while (started.load() < workers.size()) std::this_thread::yield();
  unsigned most_ejected = 0;
  for (int step = 0; step < 2000 || (transitions.load() < 100 && step < 10'000'000); ++step) {
    clock.advance(50ms);
    for (auto& s : servers) s->tick();
    most_ejected = std::max({most_ejected, count_ejected(), guard->ejected()});
  }
  stop = true;
  for (auto& t : workers) t.join();
  EXPECT_LE(most_ejected, 2u);
  EXPECT_GT(transitions.load(), 0u);
  EXPECT_EQ(guard->ejected(), count_ejected());
}

}  // namespace
}  // namespace sluice::health

namespace sluice::health {
namespace {

TEST(HealthLogLimit, OneLinePerSecondWithTheCountHeldBack) {
  ManualClock clock;
  ServerHealth::LogLimit limit;
  std::uint32_t held = 99;
  EXPECT_TRUE(limit.admit(clock.now(), held));
  EXPECT_EQ(held, 0u);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limit.admit(clock.now(), held));
  clock.advance(std::chrono::milliseconds(999));
  EXPECT_FALSE(limit.admit(clock.now(), held));
  clock.advance(std::chrono::milliseconds(1));
  EXPECT_TRUE(limit.admit(clock.now(), held));
  EXPECT_EQ(held, 6u);
}

TEST(HealthFailureNotice, TheFirstFailureOfAWindowIsANoticeWithoutAStateChange) {
  ManualClock clock;
  Endpoint endpoint = make_endpoint("a");
  ServerHealth h(endpoint, passive_only(), nullptr, clock);
  const auto first = h.live_failure(Failure::of(FailureKind::connect_refused));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->event, HealthEvent::failure_noted);
  EXPECT_EQ(first->from, ServerState::up);
  EXPECT_EQ(first->to, ServerState::up);
  EXPECT_EQ(first->reason, "failure 1 of 3 in 10s: connect refused");
  EXPECT_FALSE(h.live_failure(Failure::of(FailureKind::connect_refused)));  // the second: quiet
  EXPECT_FALSE(h.status().last_event);  // a notice is not a transition of state
}

// A server whose ejection active checks took over (down by probes) still counts against
// max_ejected_percent until it comes back up: the share of the pool out stays within the limit.
TEST(HealthEjectionGuardHandOver, DownByProbesKeepsItsSlotUntilItComesUp) {
  ManualClock clock;
  Endpoint a = make_endpoint("a");
  Endpoint b = make_endpoint("b");
  auto guard = std::make_shared<EjectionGuard>(2, 50);
  ServerHealth ha(a, both(), guard, clock);
  ServerHealth hb(b, both(), guard, clock);
  const auto fail3 = [&](ServerHealth& h) {
    std::optional<Transition> last;
    for (int i = 0; i < 3; ++i) last = h.live_failure(Failure::answered(502));
    return last;
  };
  EXPECT_EQ(fail3(ha)->event, HealthEvent::ejected);
  for (int i = 0; i < 3; ++i) ha.probe_result({false, "connect refused"});
  ASSERT_EQ(a.state(), ServerState::down);
  EXPECT_EQ(fail3(hb)->event, HealthEvent::ejection_refused);  // a still holds the one slot
  ha.probe_result({true, ""});
  EXPECT_EQ(ha.probe_result({true, ""})->event, HealthEvent::came_up);
  clock.advance(std::chrono::seconds(11));  // b's failure window is over
  EXPECT_EQ(fail3(hb)->event, HealthEvent::ejected);  // the slot is free again
}

}  // namespace
}  // namespace sluice::health
