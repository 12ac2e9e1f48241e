// Fleet mode's rules (runtime/fleet_state.hpp): what a sync leaves drained, the in-flight sum
// `drain --wait` waits on, and the reconnect back-off.
#include "sluice/runtime/fleet_state.hpp"

#include <gtest/gtest.h>

namespace sluice::fleet {
namespace {

using std::chrono::milliseconds;

TEST(FleetState, RedisStateIsTakenWhenNothingIsUnpublished) {
  EXPECT_EQ(merged_drains({"app/a", "app/b"}, {}), (std::set<std::string>{"app/a", "app/b"}));
  EXPECT_EQ(merged_drains({}, {}), std::set<std::string>{});
}

TEST(FleetState, ChangesNotYetWrittenWinOverTheRead) {
  // A drain made here during an outage survives the first read after it...
  EXPECT_EQ(merged_drains({"app/a"}, {{"app/b", true}}), (std::set<std::string>{"app/a", "app/b"}));
  // ... and so does an undrain, over a hash that still holds the server.
  EXPECT_EQ(merged_drains({"app/a", "app/b"}, {{"app/a", false}}), (std::set<std::string>{"app/b"}));
  // An undrain of a server nobody drained changes nothing.
  EXPECT_EQ(merged_drains({"app/a"}, {{"app/c", false}}), (std::set<std::string>{"app/a"}));
}

TEST(FleetState, ServerFieldAndKeys) {
  EXPECT_EQ(server_field("app", "127.0.0.1:9001"), "app/127.0.0.1:9001");
  EXPECT_EQ(instance_key("lb-1"), "sluice:fleet:instance:lb-1");
}

TEST(FleetState, ReportRoundTrip) {
  Report r;
  r.config = "9f2c";
  r.at_ms = 1700000000123;
  r.draining["app/a"] = 3;
  r.draining["api/10.0.0.1:80"] = 0;
  r.probes = {"app/a", "app/b"};
  r.out["app/c"] = "ejected";
  const auto text = encode_report(r);
  EXPECT_EQ(text, R"({"config":"9f2c","at_ms":1700000000123,"draining":{"api/10.0.0.1:80":0,"app/a":3},)"
                  R"("probes":["app/a","app/b"],"out":{"app/c":"ejected"}})");
  const auto back = decode_report(text);
  EXPECT_EQ(back.config, "9f2c");
  EXPECT_EQ(back.at_ms, 1700000000123);
  EXPECT_EQ(back.draining, r.draining);
  EXPECT_EQ(back.probes, r.probes);
  EXPECT_EQ(back.out, r.out);
}

TEST(FleetState, VerdictsDisagreeWhereOneInstanceHoldsAServerOutAndAnotherDoesNot) {
  Report mine;
  mine.out["app/a"] = "ejected";
  mine.out["app/b"] = "down";
  Report agrees;
  agrees.out["app/b"] = "down";
  Report other;
  other.out["app/b"] = "down";
  other.out["app/c"] = "down";
  const auto found = verdict_disagreements("lb-1", mine, {{"lb-2", agrees}, {"lb-3", other}});
  using Views = std::map<std::string, std::string>;
  EXPECT_EQ(found, (Disagreements{{"app/a", Views{{"lb-1", "ejected"}, {"lb-2", "in"}, {"lb-3", "in"}}},
                                  {"app/c", Views{{"lb-1", "in"}, {"lb-2", "in"}, {"lb-3", "down"}}}}));
  EXPECT_TRUE(verdict_disagreements("lb-1", mine, {}).empty()) << "alone: nobody to disagree with";
}

TEST(FleetState, AReportOfAnotherShapeReadsAsEmpty) {
  EXPECT_TRUE(decode_report("app/a\t2\n").draining.empty());
  EXPECT_TRUE(decode_report("[1,2]").draining.empty());
  const auto r = decode_report(R"({"draining":{"app/a":2,"app/b":"x"},"at_ms":"soon"})");
  EXPECT_EQ(r.draining, (std::map<std::string, std::int64_t>{{"app/a", 2}}));
  EXPECT_EQ(r.at_ms, 0);
  EXPECT_EQ(r.config, "");
}

TEST(FleetState, InFlightSumsTheInstancesThatApplyTheDrain) {
  Report b;
  b.draining["app/a"] = 2;
  Report c;
  c.draining["app/a"] = 0;
  c.draining["app/x"] = 7;
  const auto sum = sum_in_flight("app/a", 1, {b, c});
  EXPECT_EQ(sum.in_flight, 3);
  EXPECT_EQ(sum.unconfirmed, 0u);
}

TEST(FleetState, AnInstanceThatHasNotAppliedTheDrainKeepsTheWaitOpen) {
  Report b;  // has not seen the drain yet: its count is not in the report
  const auto sum = sum_in_flight("app/a", 0, {b});
  EXPECT_EQ(sum.in_flight, 0);
  EXPECT_EQ(sum.unconfirmed, 1u);
  EXPECT_EQ(sum_in_flight("app/a", 0, {}).unconfirmed, 0u);
}

TEST(FleetState, ReconnectDelayDoublesToFiveSecondsWithJitter) {
  EXPECT_EQ(reconnect_delay(0, 0.0), milliseconds(0));
  EXPECT_EQ(reconnect_delay(1, 0.0), milliseconds(100));
  EXPECT_EQ(reconnect_delay(2, 0.0), milliseconds(200));
  EXPECT_EQ(reconnect_delay(6, 0.0), milliseconds(3200));
  EXPECT_EQ(reconnect_delay(7, 0.0), milliseconds(5000));
  EXPECT_EQ(reconnect_delay(100, 0.0), milliseconds(5000));
  EXPECT_EQ(reconnect_delay(1, 0.999), milliseconds(50));
  EXPECT_EQ(reconnect_delay(7, 0.5), milliseconds(3750));
}

TEST(FleetState, LeasesSpreadOverTheInstances) {
  EXPECT_EQ(fair_share(3, 3), 1u);
  EXPECT_EQ(fair_share(4, 3), 2u);
  EXPECT_EQ(fair_share(3, 1), 3u);
  EXPECT_EQ(fair_share(2, 5), 1u);
  EXPECT_EQ(fair_share(0, 2), 0u);
  EXPECT_EQ(lease_key("app/a"), "sluice:fleet:lease:app/a");
}

TEST(FleetState, LeasesAreRenewedAtAThirdOfTheirTtlLessJitter) {
  EXPECT_EQ(renew_after(milliseconds(9000), 0.0), milliseconds(3000));
  EXPECT_EQ(renew_after(milliseconds(9000), 0.5), milliseconds(2550));
}

TEST(FleetState, VerdictRoundTripAndBadShapes) {
  const Verdict v{"lb-1", "app", "app-2", false, "status 503 not in 200-399", 1500};
  const auto back = decode_verdict(encode_verdict(v));
  ASSERT_TRUE(back);
  EXPECT_EQ((std::tuple{back->from, back->upstream, back->server, back->passed, back->detail, back->latency_us}),
            (std::tuple{v.from, v.upstream, v.server, v.passed, v.detail, v.latency_us}));
  EXPECT_FALSE(decode_verdict("nope"));
  EXPECT_FALSE(decode_verdict(R"({"from":"a","upstream":"u","server":"s","passed":"yes","detail":"","latency_us":1})"));
}

}  // namespace
}  // namespace sluice::fleet
