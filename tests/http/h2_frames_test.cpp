// The nghttp2 helpers every HTTP/2 part of sluice shares (src/http/h2_frames.cpp).
#include "sluice/http/h2_frames.hpp"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace sluice::http {
namespace {

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

TEST(H2Fields, ConnectionSpecificFieldsInAnyCase) {
  for (const char* name : {"connection", "Keep-Alive", "proxy-connection", "TRANSFER-ENCODING", "upgrade"})
    EXPECT_TRUE(connection_specific_field(name)) << name;
  for (const char* name : {"te", "host", "content-length", "connections"}) EXPECT_FALSE(connection_specific_field(name)) << name;
  EXPECT_EQ(ascii_lower('Q'), 'q');
  EXPECT_EQ(ascii_lower('-'), '-');
}

}  // namespace
}  // namespace sluice::http
