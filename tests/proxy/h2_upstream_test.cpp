// The pure pieces of HTTP/2 towards servers and of gRPC's answers: a forwarded HTTP/1.1 head as
// HTTP/2 request fields (src/proxy/h2_upstream.cpp), the gRPC status of sluice's own answers and
// grpc-message's percent-encoding (src/proxy/grpc.cpp), sessions sharing their thread's frame
// buffer (new_h2_session()). The calls themselves run end to end in
// integration/test_grpc.py and test_http2.py.
#include <map>
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

// Sessions made on one thread share the first chunk of their frame buffer: each frame is copied
// out (gather_h2_frames) before another session writes one. Two client sessions send requests
// turn about, a frame at a time, one of them with a 40 KiB field (HEADERS and CONTINUATIONs over
// several chunks); servers of nghttp2's own receive every field intact.
struct Received {
  std::map<std::string, std::string> fields;
  int requests = 0;
};

nghttp2_session* plain_server(Received& into) {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_header_callback(
      cb, [](nghttp2_session*, const nghttp2_frame*, const std::uint8_t* name, std::size_t namelen,
             const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user) {
        static_cast<Received*>(user)->fields[std::string(reinterpret_cast<const char*>(name), namelen)] =
            std::string(reinterpret_cast<const char*>(value), valuelen);
        return 0;
      });
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, [](nghttp2_session*, const nghttp2_frame* f, void* user) {
    if (f->hd.type == NGHTTP2_HEADERS && (f->hd.flags & NGHTTP2_FLAG_END_HEADERS)) ++static_cast<Received*>(user)->requests;
    return 0;
  });
  nghttp2_session* s = nullptr;
  nghttp2_session_server_new(&s, cb, &into);
  nghttp2_session_callbacks_del(cb);
  return s;
}

nghttp2_session* client_sending(const std::vector<std::pair<std::string, std::string>>& fields) {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  auto* s = new_h2_session(H2Side::client, cb, nullptr);
  nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, nullptr, 0);
  std::vector<nghttp2_nv> nv;
  for (const auto& [n, v] : fields) nv.push_back(h2_field(n, v));
  EXPECT_GT(nghttp2_submit_request(s, nullptr, nv.data(), nv.size(), nullptr, nullptr), 0);
  return s;
}

TEST(H2SessionMemory, SessionsOfOneThreadShareTheFrameBufferAndEachFrameArrivesWhole) {
  const auto before = h2_sessions_sharing_framebuf();
  const std::string big(40 * 1024, '{');  // past HPACK's Huffman coding: 40 KiB on the wire
  const std::vector<std::pair<std::string, std::string>> a_fields{
      {":method", "GET"}, {":scheme", "http"}, {":authority", "a.test"}, {":path", "/a"}, {"x-big", big}};
  const std::vector<std::pair<std::string, std::string>> b_fields{
      {":method", "POST"}, {":scheme", "http"}, {":authority", "b.test"}, {":path", "/b"}, {"x-small", "bee"}};
  auto* a = client_sending(a_fields);
  auto* b = client_sending(b_fields);
  EXPECT_EQ(h2_sessions_sharing_framebuf(), before + 2);
  Received at_a, at_b;
  auto* server_a = plain_server(at_a);
  auto* server_b = plain_server(at_b);
  for (int turn = 0; turn < 100; ++turn) {
    std::string out_a, out_b;
    gather_h2_frames(a, out_a, 1);  // one frame (or chunk) a turn
    gather_h2_frames(b, out_b, 1);
    if (out_a.empty() && out_b.empty()) break;
    ASSERT_EQ(nghttp2_session_mem_recv(server_a, reinterpret_cast<const std::uint8_t*>(out_a.data()), out_a.size()),
              static_cast<ssize_t>(out_a.size()));
    ASSERT_EQ(nghttp2_session_mem_recv(server_b, reinterpret_cast<const std::uint8_t*>(out_b.data()), out_b.size()),
              static_cast<ssize_t>(out_b.size()));
  }
  EXPECT_EQ(at_a.requests, 1);
  EXPECT_EQ(at_b.requests, 1);
  for (const auto& [n, v] : a_fields) EXPECT_EQ(at_a.fields[n], v) << n;
  for (const auto& [n, v] : b_fields) EXPECT_EQ(at_b.fields[n], v) << n;
  nghttp2_session_del(a);
  nghttp2_session_del(b);
  nghttp2_session_del(server_a);
  nghttp2_session_del(server_b);
  EXPECT_EQ(h2_sessions_sharing_framebuf(), before);
}

}  // namespace
}  // namespace sluice::proxy
