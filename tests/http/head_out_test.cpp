#include "sluice/http/head_out.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sluice::http::detail {
namespace {

std::string pattern(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + i % 26));
  return s;
}

// Every size a piece can have around the small-copy paths' edges, copied between guard bytes
// that must stay as they are.
TEST(CopyPiece, CopiesExactlyTheBytesOfEverySize) {
  for (std::size_t n = 0; n <= 40; ++n) {
    const auto from = pattern(n);
    std::string to(n + 2, '#');
    copy_piece(to.data() + 1, from.data(), n);
    EXPECT_EQ(to, "#" + from + "#") << n;
  }
}

TEST(HeadOut, AppendsAfterWhatTheStringHeldAndCutsItToWhatWasWritten) {
  std::string s = "before|";
  {
    HeadOut out(s, 64);
    out.append("GET / HTTP/1.1\r\n");
    out.push_back('X');
    EXPECT_EQ(out.size(), 7u + 16u + 1u);
  }
  EXPECT_EQ(s, "before|GET / HTTP/1.1\r\nX");
}

// More than the expected size (and more than one step at once): the string grows, what was
// written stays.
TEST(HeadOut, GrowsPastTheExpectedSize) {
  std::string s;
  std::string expected;
  {
    HeadOut out(s, 0);
    for (std::size_t n : {100u, 300u, 1u, 5000u, 17u}) {
      const auto piece = pattern(n);
      out.append(piece);
      expected += piece;
      for (int i = 0; i < 300; ++i) {
        out.push_back('.');
        expected.push_back('.');
      }
    }
    out.close();
    EXPECT_EQ(s, expected);
  }
  EXPECT_EQ(s, expected);  // the destructor's close changes nothing more
}

TEST(HeadOut, CutForgetsWhatWasWrittenAfterASize) {
  std::string s;
  {
    HeadOut out(s, 16);
    out.append("Upgrade: ");
    const auto at = out.size();
    out.append("h2c");
    out.cut(at);
    out.append("websocket\r\n");
  }
  EXPECT_EQ(s, "Upgrade: websocket\r\n");
}

// Code written for std::string appends in the middle; the cursor goes on after it.
TEST(HeadOut, WithStringHandsOverTheStringAsWrittenSoFar) {
  std::string s;
  {
    HeadOut out(s, 8);
    out.append("A: 1\r\n");
    out.with_string([](std::string& str) {
      EXPECT_EQ(str, "A: 1\r\n");
      str.append("B: ").append(pattern(600)).append("\r\n");
    });
    out.append("C: 3\r\n");
  }
  EXPECT_EQ(s, "A: 1\r\nB: " + pattern(600) + "\r\nC: 3\r\n");
}

}  // namespace
}  // namespace sluice::http::detail
