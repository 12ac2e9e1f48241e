#include "sluice/core/cidr.hpp"

#include <gtest/gtest.h>

namespace sluice {
namespace {

boost::asio::ip::address ip(const char* text) { return *parse_ip(text); }

TEST(IpText, WritesWhatToStringWrites) {
  for (const char* text : {"0.0.0.0", "127.0.0.1", "10.20.30.40", "192.168.100.9", "255.255.255.255",
                           "1.0.99.100", "::1", "::", "2001:db8::1", "fe80::1:2:3:4", "::ffff:192.0.2.1",
                           "2001:db8:0:1:1:1:1:1"}) {
    const auto a = boost::asio::ip::make_address(text);
    EXPECT_EQ(ip_text(a).view(), a.to_string()) << text;
  }
  boost::asio::ip::address_v6 scoped = boost::asio::ip::make_address_v6("fe80::1");
  scoped.scope_id(2);
  EXPECT_EQ(ip_text(scoped).view(), boost::asio::ip::address(scoped).to_string());
}

TEST(IpText, EveryIPv4OctetValue) {
  for (unsigned v = 0; v < 256; ++v) {
    const boost::asio::ip::address_v4 a({static_cast<unsigned char>(v), 0, static_cast<unsigned char>(255 - v),
                                         static_cast<unsigned char>(v)});
    EXPECT_EQ(ip_text(a).view(), a.to_string());
  }
}

TEST(Cidr, MatchesIPv4RangesAtEveryPrefixBoundary) {
  const auto c = *parse_cidr("10.0.0.0/8");
  EXPECT_TRUE(c.contains(ip("10.0.0.1")));
  EXPECT_TRUE(c.contains(ip("10.255.255.255")));
  EXPECT_FALSE(c.contains(ip("11.0.0.0")));
  EXPECT_FALSE(c.contains(ip("9.255.255.255")));
  const auto odd = *parse_cidr("192.168.4.0/22");  // a prefix that ends inside a byte
  EXPECT_TRUE(odd.contains(ip("192.168.7.200")));
  EXPECT_FALSE(odd.contains(ip("192.168.8.0")));
  EXPECT_FALSE(odd.contains(ip("192.168.3.255")));
}

TEST(Cidr, BareAddressIsASingleHostAndZeroPrefixIsEverything) {
  const auto one = *parse_cidr("127.0.0.1");
  EXPECT_EQ(one.prefix, 32u);
  EXPECT_TRUE(one.contains(ip("127.0.0.1")));
  EXPECT_FALSE(one.contains(ip("127.0.0.2")));
  const auto all = *parse_cidr("0.0.0.0/0");
  EXPECT_TRUE(all.contains(ip("203.0.113.9")));
  EXPECT_FALSE(all.contains(ip("::1")));  // families never match each other
}

TEST(Cidr, MatchesIPv6AndMappedIPv4Peers) {
  const auto c = *parse_cidr("2001:db8::/32");
  EXPECT_TRUE(c.contains(ip("2001:db8:1::5")));
  EXPECT_FALSE(c.contains(ip("2001:db9::1")));
  EXPECT_EQ(parse_cidr("::1")->prefix, 128u);
  // A dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d: they match IPv4 ranges.
  EXPECT_TRUE(parse_cidr("127.0.0.0/8")->contains(ip("::ffff:127.0.0.5")));
  EXPECT_TRUE(ip("::ffff:127.0.0.5").is_v4());
}

TEST(Cidr, RefusesMalformedRangesWithAReason) {
  std::string why;
  for (const char* bad : {"", "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/8x", "10.0.0/8",
                          "example.com", "10.0.0.0/-1", "/8"}) {
    why.clear();
    EXPECT_FALSE(parse_cidr(bad, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  EXPECT_FALSE(parse_cidr("10.1.2.3/8", &why));
  EXPECT_NE(why.find("\"10.0.0.0/8\""), std::string::npos) << why;  // suggests the network
}

TEST(Cidr, SetMatchesAnyMemberAndPrintsBack) {
  const CidrSet set{*parse_cidr("10.0.0.0/8"), *parse_cidr("::1/128")};
  EXPECT_TRUE(contains(set, ip("10.2.3.4")));
  EXPECT_TRUE(contains(set, ip("::1")));
  EXPECT_FALSE(contains(set, ip("192.0.2.1")));
  EXPECT_FALSE(contains(CidrSet{}, ip("10.2.3.4")));
  EXPECT_EQ(set[0].to_string(), "10.0.0.0/8");
  EXPECT_EQ(set[1].to_string(), "::1/128");
}

}  // namespace
}  // namespace sluice
