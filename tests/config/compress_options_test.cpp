// `compress = { codings, types, min_bytes, level }` per upstream and per route.
#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

#include "load_helpers.hpp"

namespace sluice::config {
namespace {

using compress::Coding;
using testing::Errors;
using testing::errors_of;

// An upstream whose first line is line 1, with `compress` on line 2.
LoadResult upstream_with(std::string_view compress) {
  return testing::load("[upstreams.app]\ncompress = " + std::string(compress) +
                       "\n[[upstreams.app.servers]]\naddress = \"127.0.0.1:9001\"\n");
}

TEST(ConfigCompressOptions, OffByDefault) {
  const auto result = testing::load_with_upstream("[[route]]\nupstream = \"app\"\n");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_FALSE(result.config->upstreams[0].compress.has_value());
  EXPECT_FALSE(result.config->routes[0].compress.has_value());  // inherits: none
}

TEST(ConfigCompressOptions, EmptyTableIsTheDefaults) {
  const auto result = upstream_with("{}");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  const auto& policy = result.config->upstreams[0].compress;
  ASSERT_TRUE(policy.has_value());
  EXPECT_EQ(policy->min_bytes, 1024u);
  EXPECT_EQ(policy->types.size(), compress::default_types().size());
  const std::vector<Coding> order(policy->preference.order().begin(), policy->preference.order().end());
  EXPECT_EQ(order, (std::vector<Coding>{Coding::zstd, Coding::br, Coding::gzip}));
  EXPECT_EQ(policy->levels.gzip, 5);
  EXPECT_EQ(policy->levels.zstd, 3);
  EXPECT_EQ(policy->levels.br, 4);
}

TEST(ConfigCompressOptions, EveryKeyIsRead) {
  const auto result = upstream_with(
      R"({ codings = ["GZIP", "zstd"], types = ["Text/*", "application/json"], min_bytes = "2KiB", level = { gzip = 9, zstd = 19, br = 0 } })");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  const auto& policy = *result.config->upstreams[0].compress;
  const std::vector<Coding> order(policy.preference.order().begin(), policy.preference.order().end());
  EXPECT_EQ(order, (std::vector<Coding>{Coding::gzip, Coding::zstd}));
  EXPECT_EQ(policy.types, (std::vector<std::string>{"text/*", "application/json"}));
  EXPECT_EQ(policy.min_bytes, 2048u);
  EXPECT_EQ(policy.levels.gzip, 9);
  EXPECT_EQ(policy.levels.zstd, 19);
  EXPECT_EQ(policy.levels.br, 0);
}

TEST(ConfigCompressOptions, RouteReplacesTheUpstreams) {
  const auto result = testing::load(R"([upstreams.app]
compress = { min_bytes = 10 }
[[upstreams.app.servers]]
address = "127.0.0.1:9001"
[[route]]
path_prefix = "/off/"
upstream = "app"
compress = false
[[route]]
path_prefix = "/own/"
upstream = "app"
compress = { codings = ["br"] }
[[route]]
path_prefix = "/"
upstream = "app"
)");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  const auto& routes = result.config->routes;
  ASSERT_EQ(routes.size(), 3u);
  ASSERT_TRUE(routes[0].compress.has_value());
  EXPECT_FALSE(routes[0].compress->has_value());
  ASSERT_TRUE(routes[1].compress.has_value() && routes[1].compress->has_value());
  EXPECT_EQ((*routes[1].compress)->min_bytes, 1024u);  // the route's own table, not merged
  EXPECT_EQ((*routes[1].compress)->preference.order().size(), 1u);
  EXPECT_FALSE(routes[2].compress.has_value());
}

TEST(ConfigCompressOptions, BadValuesNameTheirKey) {
  EXPECT_EQ(errors_of(upstream_with(R"({ codings = ["gzip", "deflate"] })")),
            (Errors{"test.toml:2:33: upstreams.app.compress.codings[1]: unknown coding 'deflate'; expected one "
                    "of: zstd, br, gzip"}));
  EXPECT_EQ(errors_of(upstream_with(R"({ codings = ["br", "br"] })")),
            (Errors{"test.toml:2:31: upstreams.app.compress.codings[1]: 'br' is listed twice"}));
  EXPECT_EQ(errors_of(upstream_with(R"({ types = ["text/html", "html"] })")),
            (Errors{"test.toml:2:36: upstreams.app.compress.types[1]: 'html' is not a media range; expected "
                    "\"type/subtype\" or \"type/*\" (no parameters)"}));
  EXPECT_EQ(errors_of(upstream_with(R"({ level = { gzip = 10 } })")),
            (Errors{"test.toml:2:31: upstreams.app.compress.level.gzip: must be between 1 and 9, got 10"}));
  EXPECT_EQ(errors_of(upstream_with(R"({ level = { zstd = 0 } })")),
            (Errors{"test.toml:2:31: upstreams.app.compress.level.zstd: must be between 1 and 19, got 0"}));
  EXPECT_EQ(errors_of(upstream_with(R"({ level = { lz4 = 1 } })")).size(), 1u);
  EXPECT_EQ(errors_of(upstream_with(R"({ minbytes = 1 })")).size(), 1u);
  EXPECT_EQ(errors_of(upstream_with("true")).size(), 1u);
  EXPECT_EQ(errors_of(upstream_with(R"({ types = [] })")).size(), 1u);
  EXPECT_EQ(errors_of(upstream_with(R"({ codings = [] })")).size(), 1u);
}

}  // namespace
}  // namespace sluice::config
