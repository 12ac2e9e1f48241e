// Keys of servers from DNS: [dns], a server's `resolve` and `resolve_interval`, an upstream's
// `discover` (docs/discovery.md).
#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

#include "load_helpers.hpp"

namespace sluice::config {
namespace {

using std::chrono::seconds;
using testing::Errors;
using testing::errors_of;
using testing::load;

TEST(ConfigDnsOptions, Defaults) {
  const auto result = testing::load_with_upstream("");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  const auto& dns = result.config->dns;
  EXPECT_TRUE(dns.servers.empty());
  EXPECT_EQ(dns.timeout, seconds(2));
  EXPECT_EQ(dns.attempts, 2u);
  EXPECT_EQ(dns.min_ttl, seconds(1));
  EXPECT_EQ(dns.max_ttl, seconds(300));
  EXPECT_EQ(dns.stale_ttl, seconds(3600));
  EXPECT_FALSE(dns.allow_empty);
  EXPECT_FALSE(result.config->upstreams[0].discovers());
}

TEST(ConfigDnsOptions, EveryKeyIsRead) {
  const auto result = load(R"([dns]
servers = ["127.0.0.1:5353", "[::1]:53"]
timeout = "300ms"
attempts = 3
min_ttl = "5s"
max_ttl = "1m"
stale_ttl = "10m"
allow_empty = true
[upstreams.app]
discover = { srv = "_http._tcp.app.service.consul", resolve_interval = "10s" }
[[upstreams.app.servers]]
address = "app.internal:8080"
resolve = true
resolve_interval = "3s"
weight = 2
)");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  const auto& c = *result.config;
  ASSERT_EQ(c.dns.servers.size(), 2u);
  EXPECT_EQ(c.dns.servers[1].to_string(), "[::1]:53");
  EXPECT_EQ(c.dns.timeout.count(), 300);
  EXPECT_EQ(c.dns.attempts, 3u);
  EXPECT_EQ(c.dns.min_ttl, seconds(5));
  EXPECT_EQ(c.dns.max_ttl, seconds(60));
  EXPECT_EQ(c.dns.stale_ttl, seconds(600));
  EXPECT_TRUE(c.dns.allow_empty);
  const auto& u = c.upstreams[0];
  EXPECT_EQ(u.discover_srv, "_http._tcp.app.service.consul");
  EXPECT_EQ(u.discover_interval, seconds(10));
  ASSERT_EQ(u.servers.size(), 1u);
  EXPECT_TRUE(u.servers[0].resolve);
  EXPECT_EQ(u.servers[0].resolve_interval, seconds(3));
  EXPECT_TRUE(u.discovers());
  // The resolver is made once: its keys need a restart; the TTL rules apply at a reload.
  EXPECT_EQ(c.find_key("dns.servers")->reload, Reload::restart);
  EXPECT_EQ(c.find_key("dns.attempts")->reload, Reload::restart);
  EXPECT_EQ(c.find_key("dns.min_ttl")->reload, Reload::live);
}

TEST(ConfigDnsOptions, ResolveNeedsAName) {
  EXPECT_EQ(errors_of(load(R"([upstreams.app]
[[upstreams.app.servers]]
address = "10.0.0.1:80"
resolve = true
)")),
            (Errors{"test.toml:3:11: upstreams.app.servers[0].address: resolve = true needs a DNS "
                    "name, but '10.0.0.1' is an IP address"}));
}

TEST(ConfigDnsOptions, ResolvedNameIsNotLookedUpByCheck) {
  // The system resolver may not know a name that [dns] servers answer: `check` accepts it.
  const auto result = load(R"([upstreams.app]
[[upstreams.app.servers]]
address = "app.invalid:80"
resolve = true
)");
  EXPECT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
}

TEST(ConfigDnsOptions, BadValuesNameTheKey) {
  EXPECT_EQ(errors_of(load(R"([dns]
servers = ["ns.example:53"]
min_ttl = "10s"
max_ttl = "5s"
attempts = 0
)" + std::string(testing::one_upstream))),
            (Errors{"test.toml:2:12: dns.servers[0]: a name server is an IP address, got 'ns.example'",
                    "test.toml:4:11: dns.max_ttl: must be at least min_ttl (10s), got 5s",
                    "test.toml:5:12: dns.attempts: must be between 1 and 10, got 0"}));
  EXPECT_EQ(errors_of(load(R"([upstreams.app]
discover = { name = "x" }
)")),
            (Errors{"test.toml:2:12: upstreams.app.discover.srv: required key is missing (the SRV name to follow)",
                    "test.toml:2:14: upstreams.app.discover.name: unknown key 'name'; expected one of: srv, resolve_interval"}));
}

TEST(ConfigDnsOptions, ResolveIntervalWithoutResolveIsAWarning) {
  const auto result = load(R"([upstreams.app]
[[upstreams.app.servers]]
address = "127.0.0.1:80"
resolve_interval = "5s"
)");
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result.warnings.size(), 1u);
  EXPECT_EQ(result.warnings[0].to_string(),
            "test.toml:4:20: upstreams.app.servers[0].resolve_interval: has no effect without resolve = true");
}

}  // namespace
}  // namespace sluice::config
