#include "sluice/proxy/router.hpp"

#include <gtest/gtest.h>

namespace sluice {
namespace {

// The router only compares Upstream pointers; distinct addresses stand in for real groups.
const Upstream* fake(int i) { return reinterpret_cast<const Upstream*>(static_cast<std::uintptr_t>(0x1000 + 16 * i)); }

TEST(Router, WithoutRoutesTheSingleUpstreamTakesEverything) {
  Router r({}, fake(1));
  EXPECT_EQ(r.route("anything", "/x"), fake(1));
}

TEST(Router, LongestPrefixWins) {
  Router r({{"", "/", fake(1)}, {"", "/api", fake(2)}, {"", "/api/v2", fake(3)}}, nullptr);
  EXPECT_EQ(r.route("h", "/"), fake(1));
  EXPECT_EQ(r.route("h", "/apix"), fake(2));
  EXPECT_EQ(r.route("h", "/api/v2/users"), fake(3));
  EXPECT_EQ(r.route("h", "/api/v1"), fake(2));
}

TEST(Router, HostExactWildcardAndAny) {
  Router r({{"api.example.com", "/", fake(1)}, {"*.example.com", "/", fake(2)}, {"", "/", fake(3)}}, nullptr);
  EXPECT_EQ(r.route("API.Example.com:8080", "/"), fake(1));
  EXPECT_EQ(r.route("www.example.com", "/"), fake(2));
  EXPECT_EQ(r.route("example.com", "/"), fake(3));  // the wildcard needs a label before the suffix
  EXPECT_EQ(r.route("other.org", "/"), fake(3));
}

TEST(Router, NoMatchIsNull) {
  Router r({{"a.example.com", "/api", fake(1)}}, nullptr);
  EXPECT_EQ(r.route("b.example.com", "/api"), nullptr);
  EXPECT_EQ(r.route("a.example.com", "/"), nullptr);
}

TEST(Router, Ipv6HostWithPort) {
  Router r({{"[::1]", "/", fake(1)}}, nullptr);
  EXPECT_EQ(r.route("[::1]:8080", "/"), fake(1));
}

// The access log's `route`: host (or "*") and prefix of the route that matched.
TEST(Router, LabelNamesTheMatchedRoute) {
  Router r({{"API.example.com", "/v1/", fake(1)}, {"", "/", fake(2)}}, nullptr);
  const auto* api = r.match("api.example.com:443", "/v1/x");
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->upstream, fake(1));
  EXPECT_EQ(api->label, "api.example.com/v1/");
  EXPECT_EQ(r.match("other", "/x")->label, "*/");
  Router none({}, fake(3));
  EXPECT_EQ(none.match("h", "/")->upstream, fake(3));
  EXPECT_EQ(none.match("h", "/")->label, "");
}

}  // namespace
}  // namespace sluice
