#include "oracle/beast_head.hpp"
#include "sluice/http/head.hpp"
#include "sluice/http/rewrite.hpp"

#include <string>

#include <gtest/gtest.h>

namespace {

using namespace std::string_literals;
namespace http = sluice::http;

// A head parsed by the session's own function (it must be accepted).
template <class Parser>
void parse(Parser& parser, std::string_view head) {
  if constexpr (Parser::is_request::value) {
    const auto r = http::parse_request_head(parser, head);
    ASSERT_FALSE(r) << r.reason;
  } else {
    ASSERT_TRUE(http::parse_response_head(parser, head, false));
  }
}

TEST(HttpHead, ParseRequestHeadRefusesWithStatusAndReason) {
  http::RequestParser parser;
  const auto r = http::parse_request_head(
      parser, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n");
  EXPECT_EQ(r.status, 400U);
  EXPECT_EQ(r.reason, "bad content-length");
}

TEST(HttpHead, RequestHeadIsHttp11WithTheFieldsInOrder) {
  http::RequestParser parser;
  parse(parser, "GET /a?b HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n");
  std::string out;
  http::append_request_head(out, parser.get(), false);
  EXPECT_EQ(out, "GET /a?b HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n");
}

TEST(HttpHead, ChunkedRequestHeadGetsItsFramingLine) {
  http::RequestParser parser;
  parse(parser, "POST / HTTP/1.1\r\nHost: h\r\n\r\n");
  std::string out;
  http::append_request_head(out, parser.get(), true);
  EXPECT_EQ(out, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
}

// Regression (fuzz_request, corpus request/get-http10): an HTTP/1.0 request without Host was
// forwarded as HTTP/1.1 without Host, which the origin must refuse with 400.
TEST(HttpHead, Http10RequestWithoutHostIsForwardedWithAnEmptyHost) {
  http::RequestParser parser;
  parse(parser, "GET / HTTP/1.0\r\n\r\n");
  std::string out;
  http::append_request_head(out, parser.get(), false);
  EXPECT_EQ(out, "GET / HTTP/1.1\r\nHost: \r\n\r\n");
  http::RequestParser origin;
  EXPECT_FALSE(http::parse_request_head(origin, out));
}

TEST(HttpHead, PlanRechunksUnknownLengthsForHttp11AndClosesForHttp10) {
  http::ResponseParser a;
  parse(a, "HTTP/1.1 200 OK\r\n\r\n");
  const auto p11 = http::plan_response(a, false, 11, true);
  EXPECT_TRUE(p11.until_close);
  EXPECT_TRUE(p11.chunked_out);
  EXPECT_TRUE(p11.keep_alive);
  const auto p10 = http::plan_response(a, false, 10, true);
  EXPECT_FALSE(p10.chunked_out);
  EXPECT_FALSE(p10.keep_alive);
  const auto head = http::plan_response(a, true, 11, true);
  EXPECT_FALSE(head.body_expected);
  EXPECT_FALSE(head.until_close);
}

TEST(HttpHead, ResponseHeadSaysCloseOrKeepAliveAsTheClientNeeds) {
  http::ResponseParser a;
  parse(a, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n");
  std::string out;
  http::append_response_head(out, a.get(), http::plan_response(a, false, 10, true), 10, 2);
  EXPECT_EQ(out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nSluice-Attempts: 2\r\nConnection: keep-alive\r\n\r\n");
  out.clear();
  http::append_response_head(out, a.get(), http::plan_response(a, false, 11, false), 11, 1);
  EXPECT_EQ(out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n");
}

// Regression (fuzz_response, regressions/response/interim-hop-by-hop-fields): a 1xx head was
// passed to the client with its hop-by-hop fields (Keep-Alive, Connection and what it names).
TEST(HttpHead, InterimHeadIsForwardedWithoutHopByHopFields) {
  http::ResponseParser a;
  parse(a, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\nKeep-Alive: timeout=5\r\n"
           "Connection: X-A\r\nX-A: 1\r\n\r\n");
  http::strip_hop_by_hop(a.get());
  std::string out;
  http::append_interim_head(out, a.get());
  EXPECT_EQ(out, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n");
}

TEST(HttpHead, ChunkHeaderIsHexSizeAndCrlf) {
  EXPECT_EQ(http::ChunkHeader(0).view(), "0\r\n");
  EXPECT_EQ(http::ChunkHeader(0x1a2b).view(), "1a2b\r\n");
  EXPECT_EQ(http::ChunkHeader(~std::size_t{0}).view(), "ffffffffffffffff\r\n");
}

TEST(HttpHead, IdempotentMethodsAreRfc9110s) {
  namespace bhttp = boost::beast::http;
  for (const auto m : {bhttp::verb::get, bhttp::verb::head, bhttp::verb::options, bhttp::verb::trace,
                       bhttp::verb::put, bhttp::verb::delete_})
    EXPECT_TRUE(http::is_idempotent(m)) << bhttp::to_string(m);
  for (const auto m : {bhttp::verb::post, bhttp::verb::patch, bhttp::verb::connect})
    EXPECT_FALSE(http::is_idempotent(m)) << bhttp::to_string(m);
}

TEST(HttpHead, PathOfOriginAndAbsoluteForm) {
  EXPECT_EQ(http::path_of("/a/b?c"), "/a/b?c");
  EXPECT_EQ(http::path_of("http://a.example/x/y?z"), "/x/y?z");
  EXPECT_EQ(http::path_of("http://a.example"), "/");
  EXPECT_EQ(http::path_of("*"), "*");
}

TEST(HttpHead, KeepAliveTimeout) {
  EXPECT_EQ(http::keep_alive_timeout("timeout=5, max=100"), std::chrono::seconds(5));
  EXPECT_EQ(http::keep_alive_timeout("max=100"), std::nullopt);
  EXPECT_EQ(http::keep_alive_timeout("timeout="), std::nullopt);
  EXPECT_EQ(http::keep_alive_timeout("timeout=99999999"), std::chrono::seconds(86400));
}

}  // namespace
