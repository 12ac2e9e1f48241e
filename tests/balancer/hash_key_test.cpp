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

// The key over the request's index (as the session extracts it), copied out of the head's bytes.
std::optional<std::string> extract(const HashKey& k, const http::Fields& f, std::string_view target,
                                   std::string_view client_ip) {
  const auto x = http::testing::indexed(f);
  const auto v = k.extract(x->head, target, client_ip);
  return v ? std::optional<std::string>(*v) : std::nullopt;
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
  EXPECT_EQ(extract(key("client_ip"), f, "/a?b", "10.0.0.1"), "10.0.0.1");
  EXPECT_EQ(extract(key("uri"), f, "/a?b", "10.0.0.1"), "/a?b");
}

TEST(HashKey, HeaderByNameCaseInsensitively) {
  const auto k = key("header:X-User");
  EXPECT_EQ(extract(k, fields({{"x-user", "alice"}}), "/", ""), "alice");
  EXPECT_EQ(extract(k, fields({{"X-Other", "bob"}}), "/", ""), std::nullopt);
}

// One request head per kind of key: each key finds what that head holds, or nothing.
TEST(HashKey, EachKindOverTheSameHeads) {
  const auto two_users = fields({{"x-user", "alice"}, {"X-User", "bob"}});
  const auto two_cookies = fields({{"Cookie", "a=1"}, {"Cookie", "session=x"}});
  const auto near_cookie = fields({{"Cookie", "xsession=1"}});
  const auto none = fields({});
  const std::optional<std::string> no_key;
  const struct {
    const char* key;
    std::optional<std::string> two_users, two_cookies, near_cookie, none;
  } cases[] = {
      {"header:X-User", "alice", no_key, no_key, no_key},  // the first line
      {"cookie:session", no_key, "x", no_key, no_key},
      {"query:u", "9", "9", "9", "9"},
      {"uri", "/p?u=9", "/p?u=9", "/p?u=9", "/p?u=9"},
  };
  for (const auto& c : cases) {
    const auto k = key(c.key);
    EXPECT_EQ(extract(k, two_users, "/p?u=9", "10.0.0.1"), c.two_users) << c.key;
    EXPECT_EQ(extract(k, two_cookies, "/p?u=9", "10.0.0.1"), c.two_cookies) << c.key;
    EXPECT_EQ(extract(k, near_cookie, "/p?u=9", "10.0.0.1"), c.near_cookie) << c.key;
    EXPECT_EQ(extract(k, none, "/p?u=9", "10.0.0.1"), c.none) << c.key;
  }
}

TEST(HashKey, CookieByExactNameAcrossCookieLines) {
  const auto k = key("cookie:session");
  EXPECT_EQ(extract(k, fields({{"Cookie", "a=1; session=s42; b=2"}}), "/", ""), "s42");
  EXPECT_EQ(extract(k, fields({{"Cookie", "a=1"}, {"Cookie", "session=x"}}), "/", ""), "x");
  EXPECT_EQ(extract(k, fields({{"Cookie", "xsession=1; sessionx=2"}}), "/", ""), std::nullopt);
  EXPECT_EQ(extract(k, fields({}), "/", ""), std::nullopt);
}

TEST(HashKey, QueryParameter) {
  const auto k = key("query:user");
  EXPECT_EQ(extract(k, fields({}), "/p?x=1&user=u7&y=2", ""), "u7");
  EXPECT_EQ(extract(k, fields({}), "/p?user=u7#frag", ""), "u7");
  EXPECT_EQ(extract(k, fields({}), "/p?users=1", ""), std::nullopt);
  EXPECT_EQ(extract(k, fields({}), "/p", ""), std::nullopt);
}

}  // namespace
}  // namespace sluice
