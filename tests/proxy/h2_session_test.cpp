// The HTTP/2 connection (src/proxy/h2_session.cpp, h2_stream.cpp, h2_response.cpp) over real
// loopback sockets, between a client whose frames nghttp2's client session writes in memory and
// the test's HTTP/1.1 origin: h2c with prior knowledge handed over from the HTTP/1.1 session, a
// stream forwarded as the exact HTTP/1.1 head an HTTP/1.1 client's request gets, concurrent
// streams, and malformed streams reset with nothing reaching the origin.
#include <map>
#include <optional>

#include <nghttp2/nghttp2.h>

#include "session_harness.hpp"

namespace sluice::proxy {
namespace {

using namespace session_test;

// An HTTP/2 client in memory: requests submitted to nghttp2's client session, its bytes sent
// through the harness's Client, what comes back fed to it and recorded per stream.
class H2Client {
public:
  struct Stream {
    std::map<std::string, std::string> headers;
    std::string body;
    bool closed = false;
    std::uint32_t error = 0;  // RST_STREAM's code
  };

  H2Client() {
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(
        cb, +[](nghttp2_session*, const nghttp2_frame* f, const std::uint8_t* n, std::size_t nl,
                const std::uint8_t* v, std::size_t vl, std::uint8_t, void* self) {
          static_cast<H2Client*>(self)->streams[f->hd.stream_id].headers[std::string(n, n + nl)] =
              std::string(v, v + vl);
          return 0;
        });
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        cb, +[](nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* d, std::size_t len, void* self) {
          static_cast<H2Client*>(self)->streams[id].body.append(d, d + len);
          return 0;
        });
    nghttp2_session_callbacks_set_on_stream_close_callback(
        cb, +[](nghttp2_session*, std::int32_t id, std::uint32_t error, void* self) {
          auto& s = static_cast<H2Client*>(self)->streams[id];
          s.closed = true;
          s.error = error;
          return 0;
        });
    nghttp2_session_callbacks_set_on_frame_recv_callback(
        cb, +[](nghttp2_session*, const nghttp2_frame* f, void* self) {
          auto& c = *static_cast<H2Client*>(self);
          if (f->hd.type == NGHTTP2_GOAWAY) {
            c.goaway = f->goaway.error_code;
            c.goaway_last = f->goaway.last_stream_id;
          }
          if (f->hd.type == NGHTTP2_PING && (f->hd.flags & NGHTTP2_FLAG_ACK) != 0) ++c.ping_acks;
          return 0;
        });
    nghttp2_session_client_new(&session_, cb, this);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
  }
  ~H2Client() { nghttp2_session_del(session_); }

  std::int32_t request(const std::vector<std::pair<std::string, std::string>>& fields) {
    std::vector<nghttp2_nv> nv;
    for (const auto& [n, v] : fields) {
      // Names as given (nghttp2 would lowercase a copy): kept here until they are sent.
      const auto& name = names_.emplace_back(n);
      nv.push_back({reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<std::uint8_t*>(const_cast<char*>(v.data())), name.size(), v.size(),
                    NGHTTP2_NV_FLAG_NO_COPY_NAME});
    }
    return nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(), nullptr, nullptr);
  }
  void ping() { nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, nullptr); }
  // The GOAWAY the server sent, if any: its error code.
  std::optional<std::uint32_t> goaway;
  std::int32_t goaway_last = 0;  // its last-stream-id
  std::uint32_t remote_setting(nghttp2_settings_id id) { return nghttp2_session_get_remote_settings(session_, id); }
  int ping_acks = 0;
  // What nghttp2 has to send (the preface first).
  std::string output() {
    std::string out;
    const std::uint8_t* data = nullptr;
    for (ssize_t n; (n = nghttp2_session_mem_send(session_, &data)) > 0;)
      out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    return out;
  }
  void input(std::string_view bytes) {
    nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }

  std::map<std::int32_t, Stream> streams;

private:
  nghttp2_session* session_ = nullptr;
  std::deque<std::string> names_;
};

class Http2SessionTest : public SessionHarness {
protected:
  // Sends what the client has, and feeds it what came back, until `done()`.
  template <class Done>
  bool exchange(Client& c, H2Client& h2, Done&& done) {
    return run_until([&] {
      if (auto out = h2.output(); !out.empty()) c.send(std::move(out));
      h2.input(c.unread());
      c.taken = c.received.size();
      return done();
    });
  }

  static std::vector<std::pair<std::string, std::string>> get(std::string path) {
    return {{":method", "GET"}, {":scheme", "http"}, {":authority", "app.test"}, {":path", std::move(path)}};
  }
};

TEST_F(Http2SessionTest, AStreamReachesTheOriginAsTheHttp11HeadOfAnHttp11Client) {
  configure("h2c = true");
  auto& client = connect();
  H2Client h2;
  auto fields = get("/x?y=1");
  fields.emplace_back("x-request-id", "h2-1");
  const auto id = h2.request(fields);
  ASSERT_TRUE(exchange(client, h2, [&] { return h2.streams[id].closed; }));
  EXPECT_EQ(h2.streams[id].error, 0u);
  EXPECT_EQ(h2.streams[id].headers[":status"], "200");
  EXPECT_EQ(h2.streams[id].headers["x-request-id"], "h2-1");
  EXPECT_EQ(h2.streams[id].body, "ok");
  ASSERT_EQ(origin_.accepted(), 1u);
  EXPECT_EQ(origin_.connections[0]->received, forwarded_head("GET /x?y=1 HTTP/1.1", "h2-1"));
}

// Each answer is read whole from the origin, so its connection goes back to the pool: streams
// one after the other take the same one.
TEST_F(Http2SessionTest, StreamsOneAfterTheOtherReuseTheOriginConnection) {
  configure("h2c = true");
  auto& client = connect();
  H2Client h2;
  for (int i = 0; i < 3; ++i) {
    const auto id = h2.request(get("/r" + std::to_string(i)));
    ASSERT_TRUE(exchange(client, h2, [&] { return h2.streams[id].closed; }));
    EXPECT_EQ(h2.streams[id].body, "ok") << i;
  }
  EXPECT_EQ(origin_.requests(), 3u);
  EXPECT_EQ(origin_.accepted(), 1u);
}

TEST_F(Http2SessionTest, ConcurrentStreamsAreEachAnswered) {
  configure("h2c = true");
  auto& client = connect();
  H2Client h2;
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(h2.request(get("/s" + std::to_string(i))));
  ASSERT_TRUE(exchange(client, h2, [&] {
    return std::all_of(ids.begin(), ids.end(), [&](auto id) { return h2.streams[id].closed; });
  }));
  for (const auto id : ids) {
    EXPECT_EQ(h2.streams[id].headers[":status"], "200") << id;
    EXPECT_EQ(h2.streams[id].body, "ok") << id;
  }
  EXPECT_EQ(origin_.requests(), 5u);
}

// SETTINGS carry the limits of [server]: the HPACK table a client may use among them.
TEST_F(Http2SessionTest, SettingsAnnounceTheServersLimits) {
  configure("h2c = true\nhttp2_header_table_bytes = 1024\nhttp2_max_concurrent_streams = 7");
  auto& client = connect();
  H2Client h2;
  const auto id = h2.request(get("/"));
  ASSERT_TRUE(exchange(client, h2, [&] { return h2.streams[id].closed; }));
  EXPECT_EQ(h2.remote_setting(NGHTTP2_SETTINGS_HEADER_TABLE_SIZE), 1024u);
  EXPECT_EQ(h2.remote_setting(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS), 7u);
}

// http2_max_requests: the last request's stream is named in a GOAWAY(NO_ERROR) and answered;
// a stream the client opened after it never reaches the origin (the client may send it again
// on a new connection), and the connection closes once the answered streams are done.
TEST_F(Http2SessionTest, AfterItsLastRequestTheConnectionSaysGoawayAndCloses) {
  configure("h2c = true\nhttp2_max_requests = 2");
  auto& client = connect();
  H2Client h2;
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(h2.request(get("/m" + std::to_string(i))));
  ASSERT_TRUE(exchange(client, h2, [&] { return h2.streams[ids[0]].closed && h2.streams[ids[1]].closed && client.ended; }));
  ASSERT_TRUE(h2.goaway.has_value());
  EXPECT_EQ(*h2.goaway, NGHTTP2_NO_ERROR);
  EXPECT_EQ(h2.goaway_last, ids[1]);
  EXPECT_EQ(h2.streams[ids[0]].headers[":status"], "200");
  EXPECT_EQ(h2.streams[ids[1]].headers[":status"], "200");
  EXPECT_TRUE(h2.streams[ids[2]].headers.empty());
  EXPECT_EQ(origin_.requests(), 2u);
}

// The preface split by the network before "HTTP/2.0": its first bytes are refused by the
// HTTP/1.1 scanner already, yet they are HTTP/2's start, not a bad request.
TEST_F(Http2SessionTest, APrefaceThatComesInTwoPiecesIsHttp2) {
  configure("h2c = true");
  auto& client = connect();
  H2Client h2;
  const auto id = h2.request(get("/split"));
  auto bytes = h2.output();
  client.send(bytes.substr(0, 12));  // "PRI * HTTP/2"
  settle();
  EXPECT_FALSE(client.received.starts_with("HTTP/1.1")) << client.received;
  client.send(bytes.substr(12));
  ASSERT_TRUE(exchange(client, h2, [&] { return h2.streams[id].closed; }));
  EXPECT_EQ(h2.streams[id].headers[":status"], "200");
  EXPECT_EQ(origin_.requests(), 1u);
}

// Frames that bring no request are forgiven one a second: a PING a second for longer than the
// budget is no flood, and a burst of them past http2_max_glitches gets GOAWAY(ENHANCE_YOUR_CALM).
TEST_F(Http2SessionTest, APingASecondIsFineAndAFloodOfThemGetsGoaway) {
  configure("h2c = true\nhttp2_max_glitches = 5");
  auto& client = connect();
  H2Client h2;
  for (int i = 1; i <= 12; ++i) {
    h2.ping();
    ASSERT_TRUE(exchange(client, h2, [&] { return h2.ping_acks == i; }));
    clock_.advance(std::chrono::seconds(1));
  }
  EXPECT_FALSE(h2.goaway.has_value());
  for (int i = 0; i < 5; ++i) h2.ping();
  ASSERT_TRUE(exchange(client, h2, [&] { return h2.goaway.has_value(); }));
  EXPECT_EQ(*h2.goaway, NGHTTP2_ENHANCE_YOUR_CALM);
}

TEST_F(Http2SessionTest, MalformedStreamsAreResetAndNothingReachesTheOrigin) {
  configure("h2c = true");
  auto& client = connect();
  H2Client h2;
  auto host_differs = get("/h");
  host_differs.emplace_back("host", "other.test");
  auto connection = get("/c");
  connection.emplace_back("connection", "close");
  auto upper = get("/u");
  upper.emplace_back("X-Upper", "1");
  std::vector<std::int32_t> ids{h2.request(host_differs), h2.request(connection), h2.request(upper)};
  ASSERT_TRUE(exchange(client, h2, [&] {
    return std::all_of(ids.begin(), ids.end(), [&](auto id) { return h2.streams[id].closed; });
  }));
  for (const auto id : ids) EXPECT_EQ(h2.streams[id].error, NGHTTP2_PROTOCOL_ERROR) << id;
  settle();
  EXPECT_EQ(origin_.accepted(), 0u);
}

TEST_F(Http2SessionTest, WithoutH2cThePrefaceIsAnHttp11BadRequest) {
  configure();
  auto& client = connect();
  H2Client h2;
  client.send(h2.output());
  const auto response = next_response(client);
  EXPECT_EQ(response.substr(0, response.find("\r\n")), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(http2_ended_, 0);
  EXPECT_EQ(origin_.accepted(), 0u);
}

}  // namespace
}  // namespace sluice::proxy
