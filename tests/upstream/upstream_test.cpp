#include "sluice/upstream/upstream.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "sluice/endpoint/endpoint.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;
namespace ip = boost::asio::ip;

std::shared_ptr<Endpoint> endpoint(const std::string& name, std::uint16_t port) {
  return std::make_shared<Endpoint>(name, config::HostPort{"127.0.0.1", port},
                                    ip::tcp::endpoint(ip::make_address("127.0.0.1"), port), 1);
}

config::UpstreamConfig upstream_config(config::Balance balance = config::Balance::round_robin) {
  config::UpstreamConfig c;
  c.name = "app";
  c.balance = balance;
  return c;
}

TEST(UpstreamWaitQueue, FirstComeFirstServedWithinItsCapacity) {
  WaitQueue q;
  const auto a = q.enter(2);
  const auto b = q.enter(2);
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  EXPECT_EQ(q.enter(2), 0u);  // full: no ticket
  EXPECT_EQ(q.size(), 2u);
  EXPECT_TRUE(q.is_head(a));
  EXPECT_FALSE(q.is_head(b));
  q.leave(a);
  EXPECT_TRUE(q.is_head(b));
  const auto c = q.enter(2);  // room again, behind b
  EXPECT_NE(c, 0u);
  EXPECT_FALSE(q.is_head(c));
  q.leave(c);  // a waiter that gives up leaves from the middle or the end
  q.leave(b);
  EXPECT_EQ(q.size(), 0u);
  EXPECT_FALSE(q.is_head(b));
}

TEST(UpstreamHealthPolicy, FromTheUpstreamsConfig) {
  auto c = upstream_config();
  auto p = health_policy(c);
  EXPECT_FALSE(p.active);  // no [health]: no probes
  ASSERT_TRUE(p.passive);  // passive checks are on by default
  EXPECT_EQ(p.passive->max_fails, c.passive.max_fails);
  EXPECT_EQ(p.slow_start, Clock::duration::zero());

  c.health.emplace();
  c.health->rise = 4;
  c.health->fall = 5;
  c.passive.max_fails = 0;  // never eject
  c.slow_start = 3s;
  p = health_policy(c);
  ASSERT_TRUE(p.active);
  EXPECT_EQ(p.active->rise, 4u);
  EXPECT_EQ(p.active->fall, 5u);
  EXPECT_FALSE(p.passive);
  EXPECT_EQ(p.slow_start, Clock::duration(3s));
}

// Literal addresses only: a name would ask the machine's resolver (docs/testing.md, DNS in tests).
TEST(UpstreamResolve, LiteralAddressesNeedNoResolver) {
  EXPECT_EQ(resolve_host_port({"127.0.0.1", 8080}), ip::tcp::endpoint(ip::make_address("127.0.0.1"), 8080));
  EXPECT_EQ(resolve_host_port({"::1", 443}), ip::tcp::endpoint(ip::make_address("::1"), 443));
}

TEST(Upstream, KeepsItsServersInOrderAndPicksThroughItsPolicy) {
  Upstream u(upstream_config(), {endpoint("a", 9001), endpoint("b", 9002)}, nullptr, 1);
  EXPECT_EQ(u.name(), "app");
  ASSERT_EQ(u.endpoints().size(), 2u);
  EXPECT_EQ(u.endpoint(0)->identity(), "a");
  EXPECT_EQ(u.endpoint(1)->identity(), "b");
  EXPECT_FALSE(u.hash_key());
  EXPECT_EQ(u.tls_context(), nullptr);  // no TLS server: no client context
  EXPECT_EQ(u.tls_server_name(*u.endpoint(0)), "127.0.0.1");
  // Unserved answers are counted per worker slot, apart from any server's.
  u.unserved(0).responses[0].store(3);
  EXPECT_EQ(u.unserved(Endpoint::max_worker_slots).responses[0].load(), 3u);
}

TEST(Upstream, TheHashPolicyCarriesItsKey) {
  Upstream hashed(upstream_config(config::Balance::hash), {endpoint("a", 9001)}, nullptr, 1);
  EXPECT_TRUE(hashed.hash_key());
  Upstream plain(upstream_config(), {endpoint("a", 9001)}, nullptr, 1);
  EXPECT_FALSE(plain.hash_key());
}

TEST(Upstream, UnservedCountersHandedInAreShared) {
  std::shared_ptr<EndpointCounters[]> kept(new EndpointCounters[Endpoint::max_worker_slots]);
  Upstream before(upstream_config(), {endpoint("a", 9001)}, kept, 1);
  before.unserved(1).responses[5].store(7);
  Upstream after(upstream_config(), {endpoint("a", 9001)}, kept, 1);  // a reload's new snapshot
  EXPECT_EQ(after.unserved(1).responses[5].load(), 7u);
}

}  // namespace
}  // namespace sluice
