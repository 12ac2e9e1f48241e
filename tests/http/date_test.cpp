// The Date sluice writes (http/date.hpp): RFC 9110's IMF-fixdate, formatted once per second.
#include "sluice/http/date.hpp"

#include <ctime>

#include <gtest/gtest.h>

namespace sluice::http {
namespace {

std::string fixdate(std::int64_t t) {
  char out[imf_fixdate_size];
  format_imf_fixdate(t, out);
  return std::string(out, imf_fixdate_size);
}

TEST(HttpDate, FormatsTheImfFixdate) {
  EXPECT_EQ(fixdate(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");  // RFC 9110 §5.6.7's example
  EXPECT_EQ(fixdate(0), "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_EQ(fixdate(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
  EXPECT_EQ(fixdate(4102444799), "Thu, 31 Dec 2099 23:59:59 GMT");
}

TEST(HttpDate, FormatsAgainOnlyWhenTheSecondChanges) {
  HttpDate date;
  const auto a = date.at(784111777);
  EXPECT_EQ(a, "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(date.at(784111777).data(), a.data());  // the same bytes: no new format
  EXPECT_EQ(date.at(784111778), "Sun, 06 Nov 1994 08:49:38 GMT");
}

TEST(HttpDate, NowIsTheWallClocksSecond) {
  HttpDate date;
  const auto before = std::time(nullptr);
  const std::string now(date.now());
  const auto after = std::time(nullptr);
  EXPECT_TRUE(now == fixdate(before) || now == fixdate(after)) << now;
}

}  // namespace
}  // namespace sluice::http
