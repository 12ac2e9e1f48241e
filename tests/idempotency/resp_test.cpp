#include "sluice/idempotency/resp.hpp"

#include <gtest/gtest.h>

namespace sluice::idempotency {
namespace {

TEST(Resp, FormatsACommandAsAnArrayOfBulkStrings) {
  const std::array<std::string_view, 3> args{"SET", "k", "v"};
  EXPECT_EQ(format_command(args), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
}

// A command is itself a RESP array: parsed back it gives the same arguments, binary-safe.
TEST(Resp, CommandRoundTripsThroughTheReader) {
  const std::string binary("a\0b\r\nc", 6);
  const std::array<std::string_view, 4> args{"SET", "key", binary, ""};
  const auto bytes = format_command(args);
  ReplyReader reader;
  bool error = false;
  // Fed one byte at a time: no reply until the last one.
  for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
    ASSERT_TRUE(reader.feed(bytes.substr(i, 1)));
    ASSERT_FALSE(reader.next(error));
    ASSERT_FALSE(error);
  }
  ASSERT_TRUE(reader.feed(bytes.substr(bytes.size() - 1)));
  const auto reply = reader.next(error);
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->type, Reply::Type::array);
  ASSERT_EQ(reply->elements.size(), 4u);
  for (std::size_t i = 0; i < args.size(); ++i) EXPECT_EQ(reply->elements[i].str, args[i]);
}

TEST(Resp, ParsesEveryReplyType) {
  ReplyReader reader;
  ASSERT_TRUE(reader.feed("+OK\r\n$-1\r\n$5\r\nhello\r\n:42\r\n-ERR wrong\r\n"));
  bool error = false;
  auto r = reader.next(error);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->type, Reply::Type::status);
  EXPECT_EQ(r->str, "OK");
  r = reader.next(error);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->type, Reply::Type::nil);
  r = reader.next(error);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->type, Reply::Type::string);
  EXPECT_EQ(r->str, "hello");
  r = reader.next(error);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->type, Reply::Type::integer);
  EXPECT_EQ(r->integer, 42);
  r = reader.next(error);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->type, Reply::Type::error);
  EXPECT_EQ(r->str, "ERR wrong");
  EXPECT_FALSE(reader.next(error));
  EXPECT_FALSE(error);
}

TEST(Resp, AProtocolErrorIsReported) {
  ReplyReader reader;
  reader.feed("?nonsense\r\n");
  bool error = false;
  EXPECT_FALSE(reader.next(error));
  EXPECT_TRUE(error);
}

}  // namespace
}  // namespace sluice::idempotency
