#include "sluice/balancer/hash_key.hpp"

#include <gtest/gtest.h>

#include "../http/indexed_request.hpp"

namespace sluice {
namespace {

http::Fields fields(std::initializer_list<std::pair<std::string_view, std::string_view>> lines) {
  http::Fields f;
  for (const auto& [k, v] : lines) f.insert(k, v);
  return f;
}

// A key as the loader builds it from its config text.
HashKey key(std::string_view text) { return HashKey(config::HashKeySpec::parse(text).value()); }

TEST(HashKeySpec, GrammarAndCanonicalText) {
  for (const std::string_view ok : {"client_ip", "uri", "header:X-User", "cookie:s", "query:u"})
    EXPECT_EQ(config::HashKeySpec::parse(ok).value().to_string(), ok);
  for (const std::string_view bad : {"", "body", "header", "header:", "uri:x", "client_ip:", "Header:x"})
    EXPECT_FALSE(config::HashKeySpec::parse(bad)) << bad;
}

TEST(HashKey, ClientIpAndUri) {
  const auto f = fields({});
  EXPECT_EQ(key("client_ip").extract(f, "/a?b", "10.0.0.1"), "10.0.0.1");
  EXPECT_EQ(key("uri").extract(f, "/a?b", "10.0.0.1"), "/a?b");
}

TEST(HashKey, HeaderByNameCaseInsensitively) {
  const auto k = key("header:X-User");
  EXPECT_EQ(k.extract(fields({{"x-user", "alice"}}), "/", ""), "alice");
  EXPECT_EQ(k.extract(fields({{"X-Other", "bob"}}), "/", ""), std::nullopt);
}

// The session extracts over the request's index: the same key as over Beast's fields.
TEST(HashKey, OverTheIndexAsOverFields) {
  for (const auto* text : {"header:X-User", "cookie:session", "query:u", "uri"}) {
    const auto k = key(text);
    for (const auto& f : {fields({{"x-user", "alice"}, {"X-User", "bob"}}), fields({{"Cookie", "a=1"}, {"Cookie", "session=x"}}),
                          fields({{"Cookie", "xsession=1"}}), fields({})}) {
      const auto x = http::testing::indexed(f, "/p?u=9");
      EXPECT_EQ(k.extract(x->head, "/p?u=9", "10.0.0.1"), k.extract(f, "/p?u=9", "10.0.0.1")) << text;
    }
  }
}

TEST(HashKey, CookieByExactNameAcrossCookieLines) {
  const auto k = key("cookie:session");
  EXPECT_EQ(k.extract(fields({{"Cookie", "a=1; session=s42; b=2"}}), "/", ""), "s42");
  EXPECT_EQ(k.extract(fields({{"Cookie", "a=1"}, {"Cookie", "session=x"}}), "/", ""), "x");
  EXPECT_EQ(k.extract(fields({{"Cookie", "xsession=1; sessionx=2"}}), "/", ""), std::nullopt);
  EXPECT_EQ(k.extract(fields({}), "/", ""), std::nullopt);
}

TEST(HashKey, QueryParameter) {
  const auto k = key("query:user");
  EXPECT_EQ(k.extract(fields({}), "/p?x=1&user=u7&y=2", ""), "u7");
  EXPECT_EQ(k.extract(fields({}), "/p?user=u7#frag", ""), "u7");
  EXPECT_EQ(k.extract(fields({}), "/p?users=1", ""), std::nullopt);
  EXPECT_EQ(k.extract(fields({}), "/p", ""), std::nullopt);
}

}  // namespace
}  // namespace sluice
