#include "sluice/config/expect_status.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sluice::health {
namespace {

StatusMatcher parse(std::string_view text) {
  std::string error;
  auto m = StatusMatcher::parse(text, &error);
  EXPECT_TRUE(m) << text << ": " << error;
  return m.value_or(StatusMatcher{});
}

std::string error_of(std::string_view text) {
  std::string error;
  EXPECT_FALSE(StatusMatcher::parse(text, &error)) << text;
  return error;
}

TEST(HealthExpectStatus, Range) {
  const auto m = parse("200-399");
  EXPECT_FALSE(m.match(199));
  EXPECT_TRUE(m.match(200));
  EXPECT_TRUE(m.match(304));
  EXPECT_TRUE(m.match(399));
  EXPECT_FALSE(m.match(400));
  EXPECT_FALSE(m.match(0));
  EXPECT_FALSE(m.match(100000));
}

TEST(HealthExpectStatus, ListOfCodesAndRanges) {
  const auto m = parse("200,204,300-399");
  EXPECT_TRUE(m.match(200));
  EXPECT_FALSE(m.match(201));
  EXPECT_TRUE(m.match(204));
  EXPECT_TRUE(m.match(301));
  EXPECT_FALSE(m.match(404));
  EXPECT_EQ(m.to_string(), "200,204,300-399");
}

TEST(HealthExpectStatus, ClassesSpacesAndCanonicalForm) {
  EXPECT_EQ(parse(" 2xx , 3XX ").to_string(), "200-399");
  EXPECT_EQ(parse("204,200-203").to_string(), "200-204");
  EXPECT_EQ(parse("300 - 302").to_string(), "300-302");
  EXPECT_EQ(parse("200,200").to_string(), "200");
  EXPECT_EQ(default_expect_status().to_string(), "200-399");
}

TEST(HealthExpectStatus, BadSyntaxIsRejectedWithAReason) {
  EXPECT_EQ(error_of(""), "empty status list");
  EXPECT_EQ(error_of("  "), "empty status list");
  EXPECT_EQ(error_of("200,"), "empty item in status list (stray comma?)");
  EXPECT_EQ(error_of(",200"), "empty item in status list (stray comma?)");
  EXPECT_EQ(error_of("200,,204"), "empty item in status list (stray comma?)");
  EXPECT_EQ(error_of("abc"), "bad status code 'abc' (expected 3 digits, 100-599)");
  EXPECT_EQ(error_of("99"), "bad status code '99' (expected 3 digits, 100-599)");
  EXPECT_EQ(error_of("600"), "bad status code '600' (expected 3 digits, 100-599)");
  EXPECT_EQ(error_of("2000"), "bad status code '2000' (expected 3 digits, 100-599)");
  EXPECT_EQ(error_of("200;204"), "bad status code '200;204' (expected 3 digits, 100-599)");
  EXPECT_EQ(error_of("399-200"), "bad status range '399-200': 399 is above 200");
  EXPECT_EQ(error_of("200-"), "bad status range '200-' (expected CODE-CODE, codes 100-599)");
  EXPECT_EQ(error_of("-200"), "bad status range '-200' (expected CODE-CODE, codes 100-599)");
  EXPECT_EQ(error_of("200-300-400"), "bad status range '200-300-400' (expected CODE-CODE, codes 100-599)");
  EXPECT_EQ(error_of("6xx"), "bad status class '6xx' (use 1xx-5xx)");
  EXPECT_EQ(error_of("2x"), "bad status code '2x' (expected 3 digits, 100-599)");
  EXPECT_FALSE(StatusMatcher::parse("+200"));
}

}  // namespace
}  // namespace sluice::health
