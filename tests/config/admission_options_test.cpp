// Edge keys (docs/edge.md): PROXY protocol, trusted proxies, Forwarded, and a route's
// allow/deny/rate_limit. Bad values name FILE:LINE:COL and the key.
#include <gtest/gtest.h>

#include "load_helpers.hpp"

namespace sluice::config {
namespace {

using namespace testing;  // load, errors_of

constexpr std::string_view route_head = "[[route]]\nupstream = \"app\"\n";

TEST(ConfigAdmission, DefaultsAreOff) {
  const auto r = load_with_upstream("");
  ASSERT_TRUE(r.config) << errors_of(r).front();
  EXPECT_FALSE(r.config->server.proxy_protocol);
  EXPECT_TRUE(r.config->server.trusted_proxies.empty());
  EXPECT_FALSE(r.config->server.forwarded_header);
}

TEST(ConfigAdmission, ServerKeysAreRead) {
  const auto r = load_with_upstream(
      "[server]\nproxy_protocol = true\ntrusted_proxies = [\"10.0.0.0/8\", \"::1\"]\n"
      "forwarded_header = \"add\"\n");
  ASSERT_TRUE(r.config) << errors_of(r).front();
  EXPECT_TRUE(r.config->server.proxy_protocol);
  ASSERT_EQ(r.config->server.trusted_proxies.size(), 2u);
  EXPECT_EQ(r.config->server.trusted_proxies[1].to_string(), "::1/128");
  EXPECT_TRUE(r.config->server.forwarded_header);
  EXPECT_EQ(r.config->find_key("server.trusted_proxies")->value, "[\"10.0.0.0/8\", \"::1/128\"]");
}

TEST(ConfigAdmission, BadServerValuesNameTheirPlace) {
  EXPECT_EQ(errors_of(load_with_upstream("[server]\ntrusted_proxies = [\"10.0.0.1/8\", 3]\n")),
            (Errors{"test.toml:2:20: server.trusted_proxies[0]: '10.0.0.1/8' has host bits set; "
                    "did you mean \"10.0.0.0/8\"?",
                    "test.toml:2:34: server.trusted_proxies[1]: expected a string like "
                    "\"10.0.0.0/8\", got integer"}));
  EXPECT_EQ(errors_of(load_with_upstream("[server]\nforwarded_header = \"yes\"\n")).size(), 1u);
  const auto lonely = errors_of(load_with_upstream("[server]\nproxy_protocol = true\n"));
  ASSERT_EQ(lonely.size(), 1u);
  EXPECT_TRUE(lonely[0].starts_with("test.toml:2:18: server.trusted_proxies: proxy_protocol is on"))
      << lonely[0];
}

TEST(ConfigAdmission, RouteAdmissionIsRead) {
  const auto r = load_with_upstream(std::string(route_head) +
                                    "allow = [\"192.0.2.0/24\"]\ndeny = [\"192.0.2.7\"]\n"
                                    "rate_limit = { rate = \"100/s\", burst = 200, key = \"header:X-Key\" }\n");
  ASSERT_TRUE(r.config) << errors_of(r).front();
  const auto& route = r.config->routes.at(0);
  EXPECT_EQ(route.allow.at(0).to_string(), "192.0.2.0/24");
  EXPECT_EQ(route.deny.at(0).to_string(), "192.0.2.7/32");
  ASSERT_TRUE(route.rate_limit);
  EXPECT_EQ(route.rate_limit->count, 100u);
  EXPECT_EQ(route.rate_limit->period, std::chrono::seconds(1));
  EXPECT_EQ(route.rate_limit->burst, 200u);
  EXPECT_EQ(route.rate_limit->key.to_string(), "header:X-Key");
  EXPECT_EQ(route.rate_limit->max_keys, 65536u);

  const auto d = load_with_upstream(std::string(route_head) + "rate_limit = { rate = \"30/m\" }\n");
  ASSERT_TRUE(d.config) << errors_of(d).front();
  EXPECT_EQ(d.config->routes.at(0).rate_limit->burst, 30u);  // burst defaults to the count
  EXPECT_EQ(d.config->routes.at(0).rate_limit->period, std::chrono::minutes(1));
}

TEST(ConfigAdmission, BadRateLimitsNameTheirKey) {
  const auto bad = [](std::string limit) {
    return errors_of(load_with_upstream(std::string(route_head) + "rate_limit = " + limit + "\n"));
  };
  EXPECT_EQ(bad("{ rate = \"100/d\" }"),
            (Errors{"test.toml:3:23: route[0].rate_limit.rate: expected COUNT/s, COUNT/m or COUNT/h "
                    "with COUNT 1..1000000, got '100/d'"}));
  EXPECT_EQ(bad("{ rate = \"0/s\" }").size(), 1u);
  EXPECT_EQ(bad("{ burst = 5 }"),
            (Errors{"test.toml:3:14: route[0].rate_limit.rate: required key is missing (requests per "
                    "unit, like \"100/s\")"}));
  EXPECT_EQ(bad("{ rate = \"1/s\", burst = 0 }").size(), 1u);
  EXPECT_EQ(bad("{ rate = \"1/s\", key = \"cookie:x\" }"),
            (Errors{"test.toml:3:36: route[0].rate_limit.key: unknown key 'cookie:x'; expected "
                    "client_ip or header:NAME"}));
  EXPECT_EQ(bad("{ rate = \"1/s\", speed = 1 }").size(), 1u);
  EXPECT_EQ(bad("\"100/s\"").size(), 1u);
}

}  // namespace
}  // namespace sluice::config
