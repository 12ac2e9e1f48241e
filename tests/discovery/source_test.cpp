// Source: answers -> servers, TTL clamping, failures keep the last good set until stale_ttl.
// Time from a ManualClock: no test sleeps.
#include "sluice/discovery/source.hpp"

#include <gtest/gtest.h>

namespace sluice::discovery {
namespace {

using std::chrono::seconds;
namespace ip = boost::asio::ip;

config::ServerConfig resolve_server(std::string address = "app.test", std::uint16_t port = 8080) {
  config::ServerConfig s;
  s.address = {std::move(address), port};
  s.resolve = true;
  s.weight = 2;
  s.max_conns = 7;
  return s;
}

Answer a_records(std::initializer_list<const char*> ips, int ttl) {
  Answer a{Outcome::ok, {}, seconds(ttl), {}};
  for (const char* text : ips) a.records.push_back({"app.test", ip::make_address(text), 0, 0, 0});
  return a;
}

Answer failed(std::string why = "Timeout while contacting DNS servers") {
  return Answer{Outcome::failed, {}, seconds(0), std::move(why)};
}

std::vector<std::string> names(const Source& s) {
  std::vector<std::string> out;
  for (const auto& server : s.servers()) out.push_back(server.name);
  return out;
}

struct SourceTest : ::testing::Test {
  ManualClock clock;
  config::DnsSection dns;
  Source source{Source::Kind::name, "app", "app.test", resolve_server(), {}};
};

TEST_F(SourceTest, EveryRecordIsAServerNamedByItsAddress) {
  const auto change = source.apply(a_records({"10.0.0.3", "10.0.0.1", "::1"}, 30), dns, clock.now());
  EXPECT_EQ(change.added, (std::vector<std::string>{"app.test@10.0.0.1:8080", "app.test@10.0.0.3:8080",
                                                    "app.test@[::1]:8080"}));
  EXPECT_EQ(names(source), change.added);
  const auto& s = source.servers()[0];
  EXPECT_EQ(s.address.to_string(), "10.0.0.1:8080");
  EXPECT_EQ(s.weight, 2u);  // the file's settings of the `resolve` server
  EXPECT_EQ(s.max_conns, 7u);
  EXPECT_FALSE(s.resolve);
  EXPECT_EQ(s.origin, "dns");
  EXPECT_EQ(s.source, "app.test");
}

TEST_F(SourceTest, OrderOfTheAnswerDoesNotMatter) {
  Source other{Source::Kind::name, "app", "app.test", resolve_server(), {}};
  source.apply(a_records({"10.0.0.1", "10.0.0.2", "10.0.0.3"}, 30), dns, clock.now());
  other.apply(a_records({"10.0.0.3", "10.0.0.1", "10.0.0.2"}, 30), dns, clock.now());
  EXPECT_EQ(names(source), names(other));
  EXPECT_TRUE(source.apply(a_records({"10.0.0.2", "10.0.0.3", "10.0.0.1"}, 30), dns, clock.now()).empty());
}

TEST_F(SourceTest, ChangeSaysWhoCameAndWent) {
  source.apply(a_records({"10.0.0.1", "10.0.0.2", "10.0.0.3"}, 30), dns, clock.now());
  const auto change = source.apply(a_records({"10.0.0.2", "10.0.0.3", "10.0.0.7"}, 30), dns, clock.now());
  EXPECT_EQ(change.added, (std::vector<std::string>{"app.test@10.0.0.7:8080"}));
  EXPECT_EQ(change.removed, (std::vector<std::string>{"app.test@10.0.0.1:8080"}));
  EXPECT_EQ(source.changes(), 2u);
}

TEST_F(SourceTest, NextQueryAtTheTtlClampedToMinAndMax) {
  dns.min_ttl = seconds(5);
  dns.max_ttl = seconds(60);
  const auto t0 = clock.now();
  source.apply(a_records({"10.0.0.1"}, 30), dns, t0);
  EXPECT_EQ(source.next_query() - t0, seconds(30));
  source.apply(a_records({"10.0.0.1"}, 0), dns, t0);
  EXPECT_EQ(source.next_query() - t0, seconds(5));
  source.apply(a_records({"10.0.0.1"}, 86400), dns, t0);
  EXPECT_EQ(source.next_query() - t0, seconds(60));
}

TEST_F(SourceTest, ResolveIntervalOverridesTheTtl) {
  Source fixed{Source::Kind::name, "app", "app.test", resolve_server(), seconds(7)};
  fixed.apply(a_records({"10.0.0.1"}, 300), dns, clock.now());
  EXPECT_EQ(fixed.next_query() - clock.now(), seconds(7));
}

TEST_F(SourceTest, FailureKeepsTheLastGoodSetUntilStaleTtl) {
  dns.stale_ttl = seconds(60);
  source.apply(a_records({"10.0.0.1", "10.0.0.2"}, 1), dns, clock.now());
  clock.advance(seconds(1));
  EXPECT_TRUE(source.apply(failed(), dns, clock.now()).empty());
  ASSERT_TRUE(source.stale_since());
  EXPECT_EQ(*source.stale_since(), clock.now());
  EXPECT_EQ(source.servers().size(), 2u);
  EXPECT_EQ(source.last_error(), "Timeout while contacting DNS servers");
  EXPECT_EQ(source.next_query() - clock.now(), seconds(1));  // asked again soon
  clock.advance(seconds(59));
  EXPECT_TRUE(source.apply(failed("SERVFAIL"), dns, clock.now()).empty());
  EXPECT_EQ(source.servers().size(), 2u);
  clock.advance(seconds(1));
  const auto change = source.apply(failed(), dns, clock.now());  // 60 s stale: gone
  EXPECT_EQ(change.removed.size(), 2u);
  EXPECT_TRUE(source.servers().empty());
  EXPECT_FALSE(source.stale_since());
}

TEST_F(SourceTest, AGoodAnswerEndsStaleness) {
  source.apply(a_records({"10.0.0.1"}, 1), dns, clock.now());
  source.apply(failed(), dns, clock.now());
  ASSERT_TRUE(source.stale_since());
  clock.advance(seconds(3));
  EXPECT_TRUE(source.apply(a_records({"10.0.0.1"}, 1), dns, clock.now()).empty());
  EXPECT_FALSE(source.stale_since());
  EXPECT_EQ(source.last_error(), "");
  EXPECT_EQ(source.resolutions(Outcome::ok), 2u);
  EXPECT_EQ(source.resolutions(Outcome::failed), 1u);
}

TEST_F(SourceTest, EmptyAnswerAppliedOnlyWhenAllowed) {
  source.apply(a_records({"10.0.0.1"}, 1), dns, clock.now());
  const Answer empty{Outcome::empty, {}, seconds(0), "no data"};
  EXPECT_TRUE(source.apply(empty, dns, clock.now()).empty());
  EXPECT_EQ(source.servers().size(), 1u);
  EXPECT_TRUE(source.stale_since());
  dns.allow_empty = true;
  EXPECT_EQ(source.apply(empty, dns, clock.now()).removed.size(), 1u);
  EXPECT_TRUE(source.servers().empty());
}

TEST_F(SourceTest, SrvWeightsAndPrioritiesBecomeWeightAndBackup) {
  Source srv{Source::Kind::srv, "app", "_http._tcp.app.test", config::ServerConfig{}, {}};
  Answer a{Outcome::ok, {}, seconds(30), {}};
  a.records = {{"one.test", ip::make_address("127.0.0.1"), 8081, 10, 3},
               {"two.test", ip::make_address("127.0.0.1"), 8082, 10, 1},
               {"three.test", ip::make_address("127.0.0.1"), 8083, 20, 0}};
  srv.apply(a, dns, clock.now());
  ASSERT_EQ(srv.servers().size(), 3u);
  const auto& s = srv.servers();
  EXPECT_EQ(s[0].name, "one.test@127.0.0.1:8081");
  EXPECT_EQ(s[0].weight, 3u);
  EXPECT_FALSE(s[0].backup);
  EXPECT_EQ(s[1].name, "three.test@127.0.0.1:8083");
  EXPECT_EQ(s[1].weight, 1u);  // SRV weight 0: the smallest weight there is
  EXPECT_TRUE(s[1].backup);
  EXPECT_EQ(s[2].weight, 1u);
  EXPECT_EQ(s[0].origin, "srv");
  // A new weight for a survivor is a change (the balancer is rebuilt), not a new server.
  a.records[0].weight = 5;
  const auto change = srv.apply(a, dns, clock.now());
  EXPECT_TRUE(change.added.empty());
  EXPECT_TRUE(change.reweighted);
}

TEST_F(SourceTest, UpdateAppliesTheFilesNewSettingsToFoundServers) {
  source.apply(a_records({"10.0.0.1"}, 30), dns, clock.now());
  auto s = resolve_server();
  s.weight = 9;
  source.update(s, {});
  EXPECT_EQ(source.servers()[0].weight, 9u);
  EXPECT_EQ(source.servers()[0].name, "app.test@10.0.0.1:8080");
}

}  // namespace
}  // namespace sluice::discovery
