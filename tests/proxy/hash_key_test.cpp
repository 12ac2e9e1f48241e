#include "sluice/proxy/hash_key.hpp"

#include <gtest/gtest.h>

namespace sluice::proxy {
namespace {

http::Fields fields(std::initializer_list<std::pair<std::string_view, std::string_view>> lines) {
  http::Fields f;
  for (const auto& [k, v] : lines) f.insert(k, v);
  return f;
}

TEST(HashKey, ClientIpAndUri) {
  const auto f = fields({});
  EXPECT_EQ(HashKey::parse("client_ip").extract(f, "/a?b", "10.0.0.1"), "10.0.0.1");
  EXPECT_EQ(HashKey::parse("uri").extract(f, "/a?b", "10.0.0.1"), "/a?b");
}

TEST(HashKey, HeaderByNameCaseInsensitively) {
  const auto k = HashKey::parse("header:X-User");
  EXPECT_EQ(k.extract(fields({{"x-user", "alice"}}), "/", ""), "alice");
  EXPECT_EQ(k.extract(fields({{"X-Other", "bob"}}), "/", ""), std::nullopt);
}

TEST(HashKey, CookieByExactNameAcrossCookieLines) {
  const auto k = HashKey::parse("cookie:session");
  EXPECT_EQ(k.extract(fields({{"Cookie", "a=1; session=s42; b=2"}}), "/", ""), "s42");
  EXPECT_EQ(k.extract(fields({{"Cookie", "a=1"}, {"Cookie", "session=x"}}), "/", ""), "x");
  EXPECT_EQ(k.extract(fields({{"Cookie", "xsession=1; sessionx=2"}}), "/", ""), std::nullopt);
  EXPECT_EQ(k.extract(fields({}), "/", ""), std::nullopt);
}

TEST(HashKey, QueryParameter) {
  const auto k = HashKey::parse("query:user");
  EXPECT_EQ(k.extract(fields({}), "/p?x=1&user=u7&y=2", ""), "u7");
  EXPECT_EQ(k.extract(fields({}), "/p?user=u7#frag", ""), "u7");
  EXPECT_EQ(k.extract(fields({}), "/p?users=1", ""), std::nullopt);
  EXPECT_EQ(k.extract(fields({}), "/p", ""), std::nullopt);
}

}  // namespace
}  // namespace sluice::proxy
