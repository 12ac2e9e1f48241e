// The pure pieces of HTTP/2 towards servers and of gRPC's answers: a forwarded HTTP/1.1 head as
// HTTP/2 request fields (src/proxy/h2_upstream.cpp), the gRPC status of sluice's own answers and
// grpc-message's percent-encoding (src/proxy/grpc.cpp). The calls themselves run end to end in
// integration/test_grpc.py and test_http2.py.
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sluice/proxy/grpc.hpp"
#include "sluice/proxy/h2_upstream.hpp"

namespace sluice::proxy {
namespace {

std::vector<std::pair<std::string, std::string>> fields_of(std::string_view head, std::string_view scheme,
                                                           bool te) {
  std::string text;
  std::vector<nghttp2_nv> nv;
  EXPECT_TRUE(h2_request_fields(head, scheme, te, text, nv));
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : nv)
    out.emplace_back(std::string(reinterpret_cast<const char*>(f.name), f.namelen),
                     std::string(reinterpret_cast<const char*>(f.value), f.valuelen));
  return out;
}

TEST(H2RequestFields, PseudoHeadersFromTheRequestLineAndHostThenTheFieldsLowercased) {
  const auto f = fields_of(
      "POST /t.T/Echo?x=1 HTTP/1.1\r\nHost: g.test:8080\r\nContent-Type: application/grpc\r\n"
      "X-Forwarded-For: 10.0.0.1\r\nContent-Length: 7\r\n\r\n",
      "http", false);
  const std::vector<std::pair<std::string, std::string>> want{
      {":method", "POST"}, {":scheme", "http"}, {":authority", "g.test:8080"}, {":path", "/t.T/Echo?x=1"},
      {"content-type", "application/grpc"}, {"x-forwarded-for", "10.0.0.1"}, {"content-length", "7"}};
  EXPECT_EQ(f, want);
}

TEST(H2RequestFields, ConnectionSpecificFieldsAndTeAreDroppedTrailersAskedForWhenTheClientTakesThem) {
  const auto f = fields_of(
      "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
      "Proxy-Connection: x\r\nTransfer-Encoding: chunked\r\nUpgrade: h2c\r\nTE: gzip\r\nAccept: */*\r\n\r\n",
      "https", true);
  const std::vector<std::pair<std::string, std::string>> want{
      {":method", "GET"}, {":scheme", "https"}, {":authority", "a"}, {":path", "/"}, {"accept", "*/*"},
      {"te", "trailers"}};
  EXPECT_EQ(f, want);
}

TEST(H2RequestFields, AHeadWithoutARequestLineIsRefused) {
  std::string text;
  std::vector<nghttp2_nv> nv;
  EXPECT_FALSE(h2_request_fields("GARBAGE\r\n\r\n", "http", false, text, nv));
}

TEST(GrpcAnswers, ContentTypesOfGrpcCalls) {
  EXPECT_TRUE(is_grpc_content_type("application/grpc"));
  EXPECT_TRUE(is_grpc_content_type("application/grpc+proto"));
  EXPECT_TRUE(is_grpc_content_type("Application/GRPC;charset=x"));
  EXPECT_FALSE(is_grpc_content_type("application/grpc-web"));
  EXPECT_FALSE(is_grpc_content_type("application/json"));
  EXPECT_FALSE(is_grpc_content_type(""));
}

TEST(GrpcAnswers, StatusOfSluicesOwnAnswers) {
  EXPECT_EQ(grpc_status_for(502), "14");  // UNAVAILABLE
  EXPECT_EQ(grpc_status_for(503), "14");
  EXPECT_EQ(grpc_status_for(504), "4");   // DEADLINE_EXCEEDED
  EXPECT_EQ(grpc_status_for(429), "8");   // RESOURCE_EXHAUSTED
  EXPECT_EQ(grpc_status_for(413), "8");
  EXPECT_EQ(grpc_status_for(404), "12");  // UNIMPLEMENTED
  EXPECT_EQ(grpc_status_for(403), "7");   // PERMISSION_DENIED
  EXPECT_EQ(grpc_status_for(401), "16");  // UNAUTHENTICATED
  EXPECT_EQ(grpc_status_for(400), "13");  // INTERNAL
  EXPECT_EQ(grpc_status_for(418), "2");   // UNKNOWN
}

TEST(GrpcAnswers, MessageIsPercentEncodedAndCutBeforeAnEscape) {
  char out[64];
  EXPECT_EQ(grpc_message("connect refused; 100% sure\n", out), "connect refused; 100%25 sure%0A");
  char small[4];
  EXPECT_EQ(grpc_message("ab\xff", small), "ab");  // "%FF" does not fit whole
}

TEST(GrpcAnswers, GrpcTimeoutValues) {
  using namespace std::chrono;
  EXPECT_EQ(grpc_timeout("100m"), milliseconds(100));
  EXPECT_EQ(grpc_timeout("2S"), seconds(2));
  EXPECT_EQ(grpc_timeout("1H"), hours(1));
  EXPECT_EQ(grpc_timeout("3M"), minutes(3));
  EXPECT_EQ(grpc_timeout("99999999u"), microseconds(99999999));
  EXPECT_EQ(grpc_timeout("5n"), nanoseconds(5));
  EXPECT_EQ(grpc_timeout("123456789m"), std::nullopt);  // 9 digits
  EXPECT_EQ(grpc_timeout("m"), std::nullopt);
  EXPECT_EQ(grpc_timeout("10x"), std::nullopt);
  EXPECT_EQ(grpc_timeout("-1S"), std::nullopt);
  EXPECT_EQ(grpc_timeout(""), std::nullopt);
}

TEST(GrpcAnswers, CodeSlotsByValueAndOtherForTheRest) {
  EXPECT_EQ(grpc_code_names[grpc_code_slot("0")], "OK");
  EXPECT_EQ(grpc_code_names[grpc_code_slot("5")], "NOT_FOUND");
  EXPECT_EQ(grpc_code_names[grpc_code_slot("14")], "UNAVAILABLE");
  EXPECT_EQ(grpc_code_names[grpc_code_slot("16")], "UNAUTHENTICATED");
  for (const auto other : {"17", "99", "05", "", "1a", "-1", "100", " 1"})
    EXPECT_EQ(grpc_code_names[grpc_code_slot(other)], "OTHER") << other;
}

}  // namespace
}  // namespace sluice::proxy
