#include "sluice/telemetry/access_log.hpp"

#include <string>

#include <gtest/gtest.h>

namespace {

std::string escaped(std::string_view s) {
  std::string out;
  sluice::append_text_escaped(out, s);
  return out;
}

// A target like /a"b must not end the quoted request field of the text access log early.
TEST(AccessLogText, QuotesBackslashesAndControlBytesAreEscaped) {
  EXPECT_EQ(escaped("/a\"b"), "/a\\\"b");
  EXPECT_EQ(escaped("/a\\b"), "/a\\\\b");
  EXPECT_EQ(escaped(std::string_view("a\nb\x01\x7f", 5)), "a\\x0ab\\x01\\x7f");
  EXPECT_EQ(escaped("/plain?x=1&y=%20"), "/plain?x=1&y=%20");
}

}  // namespace
