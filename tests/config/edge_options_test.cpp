// Keys of the edge rules (docs/edge.md): request_headers / response_headers on a route and an
// upstream, strip_prefix / rewrite_prefix and return on a route.
#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

#include "load_helpers.hpp"

namespace sluice::config {
namespace {

using testing::Errors;
using testing::errors_of;

TEST(ConfigEdgeOptions, RulesAreReadInFileOrder) {
  const auto result = testing::load(R"([upstreams.app]
request_headers = { set = { "X-Env" = "prod", "A-First" = "$host" }, remove = ["X-Debug"] }
response_headers = { add = { "Via" = "1.1 sluice" } }
[[upstreams.app.servers]]
address = "127.0.0.1:9001"
[[route]]
path_prefix = "/api"
upstream = "app"
strip_prefix = true
response_headers = { set = { "X-Served-By" = "$server" }, remove = ["Server"] }
)");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  const auto& u = result.config->upstreams[0];
  ASSERT_EQ(u.request_headers.set.size(), 2u);
  EXPECT_EQ(u.request_headers.set[0].first, "X-Env");  // file order, not key order
  EXPECT_EQ(u.request_headers.set[1].second, "$host");
  EXPECT_EQ(u.request_headers.remove, std::vector<std::string>{"X-Debug"});
  EXPECT_EQ(u.response_headers.add[0].first, "Via");
  const auto& r = result.config->routes[0];
  EXPECT_TRUE(r.strip_prefix);
  EXPECT_EQ(r.response_headers.set[0].second, "$server");
  EXPECT_EQ(r.response_headers.remove, std::vector<std::string>{"Server"});
  const auto* key = result.config->find_key("upstreams.app.request_headers");
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(key->reload, Reload::live);
}

TEST(ConfigEdgeOptions, FramingAndHopByHopNamesAreRefusedAtTheirKey) {
  const auto result = testing::load_with_upstream(R"([[route]]
upstream = "app"
request_headers = { set = { "Content-Length" = "5" }, remove = ["Connection"] }
response_headers = { add = { "Transfer_Encoding" = "chunked", "X Bad" = "1" } }
)");
  EXPECT_EQ(errors_of(result),
            (Errors{"test.toml:3:29: route[0].request_headers.set.Content-Length: header "
                    "'Content-Length' cannot be changed by a rule: it frames the message (RFC 9112 §6.2)",
                    "test.toml:3:65: route[0].request_headers.remove[0]: header 'Connection' cannot be "
                    "changed by a rule: it is hop-by-hop (RFC 9110 §7.6.1)",
                    "test.toml:4:30: route[0].response_headers.add.Transfer_Encoding: header "
                    "'Transfer_Encoding' cannot be changed by a rule: it frames the message (RFC 9112 §6.1)",
                    "test.toml:4:63: route[0].response_headers.add.X Bad: 'X Bad' is not a header name "
                    "(RFC 9110 §5.6.2: letters, digits and !#$%&'*+-.^_`|~)"}));
}

TEST(ConfigEdgeOptions, BadValuesAreRefused) {
  const auto result = testing::load_with_upstream(R"([[route]]
upstream = "app"
request_headers = { set = { "X-A" = "$nope", "X-B" = "a\r\nX-C: 1", "X-D" = 5 }, oops = [] }
)");
  const auto errors = errors_of(result);
  ASSERT_EQ(errors.size(), 4u) << ::testing::PrintToString(errors);
  EXPECT_EQ(errors[0].rfind("test.toml:3:37: route[0].request_headers.set.X-A: unknown variable '$nope'", 0), 0u)
      << errors[0];
  EXPECT_EQ(errors[1], "test.toml:3:54: route[0].request_headers.set.X-B: byte 0x0d at offset 1 is not "
                       "allowed in a header value");
  EXPECT_EQ(errors[2], "test.toml:3:77: route[0].request_headers.set.X-D: expected a string, got integer");
  EXPECT_EQ(errors[3].rfind("test.toml:3:82: route[0].request_headers.oops: unknown key 'oops'", 0), 0u)
      << errors[3];
}

TEST(ConfigEdgeOptions, StripAndRewriteExcludeEachOther) {
  EXPECT_TRUE(testing::load_with_upstream(
                  "[[route]]\nupstream = \"app\"\npath_prefix = \"/api\"\nrewrite_prefix = \"/v2/\"\n")
                  .ok());
  EXPECT_EQ(errors_of(testing::load_with_upstream(
                "[[route]]\nupstream = \"app\"\nstrip_prefix = true\nrewrite_prefix = \"/v2/\"\n")),
            (Errors{"test.toml:4:18: route[0].rewrite_prefix: strip_prefix and rewrite_prefix exclude "
                    "each other (strip_prefix = true is rewrite_prefix = \"/\")"}));
  EXPECT_EQ(errors_of(testing::load_with_upstream("[[route]]\nupstream = \"app\"\nrewrite_prefix = \"v2?\"\n")),
            (Errors{"test.toml:3:18: route[0].rewrite_prefix: must start with '/' and hold no '?', '#', "
                    "spaces or control characters, got 'v2?'"}));
}

TEST(ConfigEdgeOptions, ReturnNeedsNoUpstream) {
  const auto result = testing::load(R"([[route]]
path_prefix = "/"
return = { status = 301, location = "https://$host$request_uri" }
)");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_TRUE(result.config->upstreams.empty());
  ASSERT_TRUE(result.config->routes[0].answer);
  EXPECT_EQ(result.config->routes[0].answer->status, 301u);
  EXPECT_EQ(result.config->routes[0].answer->location, "https://$host$request_uri");
}

TEST(ConfigEdgeOptions, ReturnIsChecked) {
  const auto result = testing::load_with_upstream(R"([[route]]
path_prefix = "/a"
return = { status = 302 }
[[route]]
path_prefix = "/b"
return = { status = 99 }
[[route]]
path_prefix = "/c"
return = { status = 204, body = "x" }
[[route]]
path_prefix = "/d"
upstream = "app"
strip_prefix = true
return = { status = 503, body = "maintenance", location = "a b" }
[[route]]
path_prefix = "/e"
return = "503"
)");
  EXPECT_EQ(errors_of(result),
            (Errors{"test.toml:3:21: route[0].return.status: a 302 answer needs a location",
                    "test.toml:6:21: route[1].return.status: must be between 200 and 599, got 99; a 1xx "
                    "is an interim answer, not a final one",
                    "test.toml:9:33: route[2].return.body: a 204 answer has no body (RFC 9110 §15.3.5, §15.4.5)",
                    "test.toml:12:12: route[3].upstream: a route with return answers itself and forwards "
                    "nothing; remove upstream",
                    "test.toml:13:16: route[3].strip_prefix: a route with return answers itself and forwards "
                    "nothing; remove strip_prefix",
                    "test.toml:14:59: route[3].return.location: byte 0x20 at offset 1 is not allowed in a URI",
                    "test.toml:17:10: route[4].return: expected a table like { status = 301, location = "
                    "\"https://$host$request_uri\" }, got string"}));
}

TEST(ConfigEdgeOptions, ARouteWithoutReturnStillNeedsItsUpstream) {
  EXPECT_EQ(errors_of(testing::load_with_upstream("[[route]]\npath_prefix = \"/\"\n")),
            (Errors{"test.toml:1:1: route[0].upstream: required key is missing (the upstream this route "
                    "sends to)"}));
  // Without upstreams, only a config whose every route answers itself is complete.
  EXPECT_FALSE(testing::load("[[route]]\nreturn = { status = 200 }\n[[route]]\npath_prefix = \"/x\"\n").ok());
}

}  // namespace
}  // namespace sluice::config
