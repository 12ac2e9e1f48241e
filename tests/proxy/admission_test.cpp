#include "sluice/proxy/admission.hpp"

#include <gtest/gtest.h>

#include "../http/indexed_request.hpp"

namespace sluice::proxy {
namespace {

using namespace std::chrono_literals;

boost::asio::ip::address ip(const char* text) { return *parse_ip(text); }

CidrSet cidrs(std::initializer_list<const char*> texts) {
  CidrSet out;
  for (const char* t : texts) out.push_back(*parse_cidr(t));
  return out;
}

http::Fields xff(std::initializer_list<const char*> lines) {
  http::Fields f;
  for (const char* l : lines) f.insert("X-Forwarded-For", l);
  return f;
}

// The client address over the lines `f` holds, indexed as the session reads them.
std::string resolved(const http::Fields& f, const char* peer, const CidrSet& trusted) {
  return std::string(resolve_client(http::testing::indexed(f)->head, peer, ip(peer), trusted).text);
}

TEST(ResolveClient, UntrustedPeerIsTheClientWhateverItClaims) {
  const auto trusted = cidrs({"10.0.0.0/8"});
  EXPECT_EQ(resolved(xff({"1.1.1.1"}), "192.0.2.1", trusted), "192.0.2.1");
  EXPECT_EQ(resolved(xff({"1.1.1.1"}), "10.0.0.1", {}), "10.0.0.1");  // nothing trusted
}

TEST(ResolveClient, WalksBackPastTrustedHopsLikeRealIpRecursive) {
  const auto trusted = cidrs({"10.0.0.0/8", "127.0.0.1/32", "2001:db8::/32"});
  // client, spoofed-by-client, then two of our own proxies
  EXPECT_EQ(resolved(xff({"6.6.6.6, 203.0.113.5, 10.1.1.1, 10.2.2.2"}), "127.0.0.1", trusted),
            "203.0.113.5");
  // Several lines are one list, in order (RFC 9110 §5.3).
  EXPECT_EQ(resolved(xff({"6.6.6.6, 203.0.113.5", "10.1.1.1"}), "127.0.0.1", trusted), "203.0.113.5");
  // All trusted: the first one.
  EXPECT_EQ(resolved(xff({"10.9.9.9, 10.1.1.1"}), "127.0.0.1", trusted), "10.9.9.9");
  // No header: the peer.
  EXPECT_EQ(resolved(http::Fields{}, "127.0.0.1", trusted), "127.0.0.1");
  // IPv6, bracketed and with ports; empty elements ignored.
  EXPECT_EQ(resolved(xff({"[2001:db9::1]:443, , 2001:db8::2"}), "127.0.0.1", trusted), "2001:db9::1");
  EXPECT_EQ(resolved(xff({"198.51.100.7:5000"}), "127.0.0.1", trusted), "198.51.100.7");
}

TEST(ResolveClient, MalformedElementStopsAtTheTrustedHopThatPassedItOn) {
  const auto trusted = cidrs({"10.0.0.0/8", "127.0.0.1/32"});
  EXPECT_EQ(resolved(xff({"203.0.113.5, unknown, 10.1.1.1"}), "127.0.0.1", trusted), "10.1.1.1");
  EXPECT_EQ(resolved(xff({"garbage"}), "127.0.0.1", trusted), "127.0.0.1");
}

config::RouteConfig route_with(CidrSet allow, CidrSet deny,
                               std::optional<config::RateLimitConfig> limit = std::nullopt) {
  config::RouteConfig r;
  r.path_prefix = "/api/";
  r.allow = std::move(allow);
  r.deny = std::move(deny);
  r.rate_limit = std::move(limit);
  return r;
}

RouteAdmission::Verdict verdict(const RouteAdmission& a, const char* client, const http::Fields& f = {},
                                Clock::time_point now = {}) {
  return a.admit({client, ip(client)}, http::testing::indexed(f)->head, "/api/x", now).verdict;
}

TEST(RouteAdmission, DenyBeatsAllowAndAnEmptyAllowListAllowsAll) {
  using V = RouteAdmission::Verdict;
  EXPECT_FALSE(RouteAdmission::needed(route_with({}, {})));
  const RouteAdmission deny_only(route_with({}, cidrs({"192.0.2.0/24"})), nullptr);
  EXPECT_EQ(verdict(deny_only, "192.0.2.9"), V::forbidden);
  EXPECT_EQ(verdict(deny_only, "198.51.100.1"), V::pass);
  const RouteAdmission both(route_with(cidrs({"10.0.0.0/8"}), cidrs({"10.6.0.0/16"})), nullptr);
  EXPECT_EQ(verdict(both, "10.1.2.3"), V::pass);
  EXPECT_EQ(verdict(both, "10.6.2.3"), V::forbidden);
  EXPECT_EQ(verdict(both, "192.0.2.1"), V::forbidden);
  EXPECT_EQ(both.denied(), 2u);
  EXPECT_EQ(both.label(), "*/api/");  // as the access log names the route
}

// Each worker counts its own refusals (no cache line written by every worker); the metrics
// read their sum, which a reload that keeps the route carries over.
TEST(RouteAdmission, RefusalsAreCountedPerWorkerAndSummed) {
  const auto route = route_with({}, cidrs({"192.0.2.0/24"}));
  const RouteAdmission a(route, nullptr);
  const auto no_fields = http::testing::indexed({});
  for (unsigned worker : {0u, 1u, 7u, 7u})
    EXPECT_EQ(a.admit({"192.0.2.9", ip("192.0.2.9")}, no_fields->head, "/api/", {}, worker).verdict,
              RouteAdmission::Verdict::forbidden);
  EXPECT_EQ(a.admit({"198.51.100.1", ip("198.51.100.1")}, no_fields->head, "/api/", {}, 3).verdict,
            RouteAdmission::Verdict::pass);
  EXPECT_EQ(a.denied(), 4u);
  const RouteAdmission reloaded(route, &a);
  EXPECT_EQ(reloaded.admit({"192.0.2.9", ip("192.0.2.9")}, no_fields->head, "/api/", {}, 2).verdict,
            RouteAdmission::Verdict::forbidden);
  EXPECT_EQ(reloaded.denied(), 5u);
  EXPECT_EQ(reloaded.limited(), 0u);
}

config::RateLimitConfig limit(std::uint32_t burst, std::string key = "client_ip") {
  config::RateLimitConfig l;
  l.count = 1;
  l.period = std::chrono::seconds(2);
  l.burst = burst;
  l.key = config::HashKeySpec::parse(key).value();
  return l;
}

TEST(RouteAdmission, RateLimitPerClientWithRetryAfter) {
  ManualClock clock;
  const RouteAdmission a(route_with({}, {}, limit(2)), nullptr);
  const auto no_fields = http::testing::indexed({});
  const auto take = [&](const char* client) { return a.admit({client, ip(client)}, no_fields->head, "/api/", clock.now()); };
  EXPECT_EQ(take("192.0.2.1").verdict, RouteAdmission::Verdict::pass);
  EXPECT_EQ(take("192.0.2.1").verdict, RouteAdmission::Verdict::pass);
  const auto r = take("192.0.2.1");
  EXPECT_EQ(r.verdict, RouteAdmission::Verdict::limited);
  EXPECT_EQ(r.retry_after, 2s);
  EXPECT_EQ(retry_after_seconds(r.retry_after), 2u);
  EXPECT_EQ(take("192.0.2.2").verdict, RouteAdmission::Verdict::pass);  // another client
  EXPECT_EQ(a.limited(), 1u);
}

TEST(RouteAdmission, HeaderKeyFallsBackToTheClientAddress) {
  ManualClock clock;
  const RouteAdmission a(route_with({}, {}, limit(1, "header:X-Api-Key")), nullptr);
  http::Fields alice, bob, none;
  alice.insert("X-Api-Key", "alice");
  bob.insert("X-Api-Key", "bob");
  const auto take = [&](const http::Fields& f) {
    return a.admit({"192.0.2.1", ip("192.0.2.1")}, http::testing::indexed(f)->head, "/api/", clock.now()).verdict;
  };
  EXPECT_EQ(take(alice), RouteAdmission::Verdict::pass);
  EXPECT_EQ(take(alice), RouteAdmission::Verdict::limited);
  EXPECT_EQ(take(bob), RouteAdmission::Verdict::pass);  // same address, another key
  EXPECT_EQ(take(none), RouteAdmission::Verdict::pass);  // keyed by 192.0.2.1
  EXPECT_EQ(take(none), RouteAdmission::Verdict::limited);
}

TEST(RouteAdmission, ReloadKeepsTheLimiterWhenItsSettingsDoNotChange) {
  ManualClock clock;
  const RouteAdmission before(route_with({}, {}, limit(1)), nullptr);
  EXPECT_EQ(verdict(before, "192.0.2.1", {}, clock.now()), RouteAdmission::Verdict::pass);
  const RouteAdmission same(route_with({}, {}, limit(1)), &before);
  EXPECT_EQ(same.limiter(), before.limiter());
  EXPECT_EQ(verdict(same, "192.0.2.1", {}, clock.now()), RouteAdmission::Verdict::limited);
  const RouteAdmission changed(route_with({}, {}, limit(5)), &same);
  EXPECT_NE(changed.limiter(), same.limiter());
  EXPECT_EQ(changed.limited(), 1u);  // counters carry over either way
}

TEST(RouteAdmission, RetryAfterIsWholeSecondsRoundedUp) {
  EXPECT_EQ(retry_after_seconds(0ms), 1u);
  EXPECT_EQ(retry_after_seconds(10ms), 1u);
  EXPECT_EQ(retry_after_seconds(1000ms), 1u);
  EXPECT_EQ(retry_after_seconds(1001ms), 2u);
}

}  // namespace
}  // namespace sluice::proxy
