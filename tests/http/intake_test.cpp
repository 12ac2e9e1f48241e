#include "sluice/http/intake.hpp"

#include "oracle/beast_head.hpp"

#include <string>

#include <gtest/gtest.h>

namespace {

namespace http = sluice::http;
using Outcome = http::ChunkedFeed::Outcome;

void parse(http::RequestParser& parser, std::string_view head) {
  const auto r = http::parse_request_head(parser, head);
  ASSERT_FALSE(r) << r.reason;
}

TEST(HttpIntake, EmptyLinesBeforeTheRequestLineAreSkippedAndTheHeadScannedAfterThem) {
  const auto step = http::next_head("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nrest", 8192, 8192);
  EXPECT_EQ(step.skipped, 4U);
  EXPECT_EQ(step.scan.result, http::HeadScan::Result::complete);
  EXPECT_EQ(step.scan.head_size, 27U);
  EXPECT_EQ(http::next_head("\r\n", 8192, 8192).scan.result, http::HeadScan::Result::need_more);
}

TEST(HttpIntake, AdmissionRefusesABodyOverTheLimitThenConnectThenABadAbsoluteTarget) {
  http::RequestParser big;
  parse(big, "CONNECT a:443 HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n");
  EXPECT_EQ(http::admit_request(big, 10).status, 413U);  // checked first, as the session does
  http::RequestParser connect;
  parse(connect, "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n");
  const auto r = http::admit_request(connect, 0);
  EXPECT_EQ(r.status, 501U);
  EXPECT_EQ(r.reason, "method not supported");
  http::RequestParser userinfo;
  parse(userinfo, "GET http://u@b/ HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(http::admit_request(userinfo, 0).status, 400U);
}

TEST(HttpIntake, AnAbsoluteFormTargetsAuthorityReplacesHost) {
  http::RequestParser parser;
  parse(parser, "GET http://b.example:8080/p HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_FALSE(http::admit_request(parser, 0));
  EXPECT_EQ(parser.get()[boost::beast::http::field::host], "b.example:8080");
}

TEST(HttpIntake, ExpectIsConsumedAndContinueOwedOnlyToAnHttp11RequestWithABodyToCome) {
  http::RequestParser parser;
  parse(parser, "PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n");
  auto shape = http::shape_forward(parser, false);
  EXPECT_TRUE(shape.expect_continue);
  EXPECT_EQ(parser.get().count(boost::beast::http::field::expect), 0U);
  http::RequestParser done;
  parse(done, "PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n");
  EXPECT_FALSE(http::shape_forward(done, true).expect_continue);
}

TEST(HttpIntake, FlushStopsAtAChunkBoundaryOnlyOnceTheBufferedBytesAreUsed) {
  http::ChunkedDecoder decoder;
  char relay[16];
  std::size_t have = 0;
  std::uint64_t in = 0;
  // The chunk's CRLF has not arrived: its data stays in the relay.
  auto f = http::feed_chunked(decoder, "3\r\nabc", relay, have, in, 0, true);
  EXPECT_EQ(f.outcome, Outcome::more);
  EXPECT_EQ(have, 3U);
  f = http::feed_chunked(decoder, "\r\n", relay, have, in, 0, true);
  EXPECT_EQ(f.outcome, Outcome::some);
  // Without flush the relay fills or the body ends first.
  http::ChunkedDecoder keep;
  have = in = 0;
  EXPECT_EQ(http::feed_chunked(keep, "3\r\nabc\r\n", relay, have, in, 0, false).outcome, Outcome::more);
}

TEST(HttpIntake, ChunkedFeedReportsAFullRelayTheEndABadByteAndTooManyBytes) {
  char relay[4];
  std::size_t have = 0;
  std::uint64_t in = 0;
  http::ChunkedDecoder full;
  auto f = http::feed_chunked(full, "6\r\nabcdef\r\n0\r\n\r\n", relay, have, in, 0, false);
  EXPECT_EQ(f.outcome, Outcome::some);
  EXPECT_EQ(f.consumed, 7U);
  have = 0;
  f = http::feed_chunked(full, "ef\r\n0\r\n\r\nGET", relay, have, in, 0, false);
  EXPECT_EQ(f.outcome, Outcome::done);
  EXPECT_EQ(f.consumed, 9U);  // the next request's bytes are left
  EXPECT_EQ(in, 6U);
  http::ChunkedDecoder bad;
  have = in = 0;
  f = http::feed_chunked(bad, "1\r\nxy", relay, have, in, 0, false);
  EXPECT_EQ(f.outcome, Outcome::invalid);
  EXPECT_NE(f.violation, http::Violation::none);
  http::ChunkedDecoder large;
  have = in = 0;
  EXPECT_EQ(http::feed_chunked(large, "3\r\nabc", relay, have, in, 2, false).outcome, Outcome::too_large);
}

}  // namespace
