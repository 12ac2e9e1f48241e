#include <gtest/gtest.h>

#include "sluice/http/strict.hpp"

namespace sluice::http {
namespace {

using Form = TargetAuthority::Form;

TEST(TargetAuthority, OriginFormAndAsteriskLeaveHostAlone) {
  EXPECT_EQ(target_authority("/").form, Form::no);
  EXPECT_EQ(target_authority("/a?b=http://c").form, Form::no);
  EXPECT_EQ(target_authority("*").form, Form::no);
  EXPECT_EQ(target_authority("example.com:443").form, Form::no);  // authority-form: CONNECT's
}

TEST(TargetAuthority, AbsoluteFormNamesItsAuthority) {
  const auto a = target_authority("http://a.example:8080/path?q");
  EXPECT_EQ(a.form, Form::ok);
  EXPECT_EQ(a.authority, "a.example:8080");
  EXPECT_EQ(target_authority("HTTPS://b.example").authority, "b.example");
  EXPECT_EQ(target_authority("http://[::1]:9000/x").authority, "[::1]:9000");
  EXPECT_EQ(target_authority("http://c.example?x").authority, "c.example");
}

TEST(TargetAuthority, BadSchemesUserinfoAndEmptyAuthoritiesAreRejected) {
  EXPECT_EQ(target_authority("ftp://a.example/").form, Form::bad);
  EXPECT_EQ(target_authority("http://user@a.example/").form, Form::bad);
  EXPECT_EQ(target_authority("http:///path").form, Form::bad);
  EXPECT_EQ(target_authority("http://a b/").form, Form::bad);
  EXPECT_EQ(target_authority("http://a.example:80x/").form, Form::bad);
}

}  // namespace
}  // namespace sluice::http
