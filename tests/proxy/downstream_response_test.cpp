// The answer's way back through the downstream session (src/proxy/downstream_response.cpp) over
// real loopback sockets: an interim 103 passed to an HTTP/1.1 client and not to an HTTP/1.0 one,
// a chunked answer relayed re-chunked with its origin connection pooled after the last chunk, a
// body the origin cut after its head (the client's connection closed where it stopped, counted
// as cut and against the server), and a malformed chunk before the head left (sluice's 502).
// The relay itself is response_relay_test.cpp's.
#include "session_harness.hpp"

namespace sluice::proxy {
namespace {

using namespace session_test;

class DownstreamResponseTest : public SessionHarness {
protected:
  const EndpointCounters& counters() const {
    return worker_.snapshot->upstreams[0]->endpoints()[0]->counters(worker_.index);
  }
};

TEST_F(DownstreamResponseTest, AnInterimHeadReachesAnHttp11ClientButNotAnHttp10One) {
  configure();
  origin_.response =
      "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  auto& client = connect();
  client.send("GET / HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: i-1\r\n\r\n");
  EXPECT_EQ(next_response(client), "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n");
  EXPECT_EQ(next_response(client), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: i-1\r\n\r\nok");

  auto& old = connect();
  old.send("GET / HTTP/1.0\r\nHost: app.test\r\nX-Request-Id: i-2\r\n\r\n");
  const auto response = next_response(old);
  EXPECT_EQ(response.substr(0, response.find("\r\n")), "HTTP/1.1 200 OK");
  EXPECT_EQ(field_of(response, "X-Request-Id"), "i-2");
  EXPECT_EQ(body_of(response), "ok");
  ASSERT_TRUE(run_until([&] { return old.ended; }));
  EXPECT_EQ(old.unread(), "");  // nothing else, no 103 before or after
}

TEST_F(DownstreamResponseTest, AChunkedAnswerIsReChunkedAndItsConnectionPooledAfterTheLastChunk) {
  configure();
  origin_.response =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4;note=x\r\nwiki\r\n5\r\npedia\r\n0\r\nX-Sum: 1\r\n\r\n";
  auto& client = connect();
  client.send("GET / HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: c-1\r\n\r\n");
  const auto response = next_response(client);
  EXPECT_EQ(field_of(response, "Transfer-Encoding"), "chunked");
  std::string body;
  ASSERT_EQ(message_size<false>(response, &body), response.size());
  EXPECT_EQ(body, "wikipedia");
  // Extensions and trailer fields are checked and dropped.
  EXPECT_EQ(response.find("note=x"), std::string::npos);
  EXPECT_EQ(response.find("X-Sum"), std::string::npos);
  EXPECT_EQ(worker_.pool.idle_count(), 1u);
  client.send("GET / HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: c-2\r\n\r\n");
  EXPECT_EQ(field_of(next_response(client), "X-Request-Id"), "c-2");
  EXPECT_EQ(origin_.accepted(), 1u);
  EXPECT_EQ(counters().responses[2].load(), 2u);
}

// After its head left, the answer is the origin's: a body that stops short ends the client's
// connection where it stopped (no 502 appended), counted as cut and against the server.
TEST_F(DownstreamResponseTest, ABodyCutAfterItsHeadLeftClosesTheClientConnectionWhereItStopped) {
  configure();
  origin_.response = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd";
  origin_.after = Origin::After::close;
  auto& client = connect();
  client.send("GET / HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: x-1\r\n\r\n");
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  EXPECT_EQ(client.unread(), "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nX-Request-Id: x-1\r\n\r\nabcd");
  ASSERT_TRUE(run_until([&] { return ended_ == 1; }));
  EXPECT_EQ(counters().responses[6].load(), 1u);  // cut
  EXPECT_EQ(counters().responses[2].load(), 0u);
  EXPECT_EQ(counters().failures.load(), 1u);
  EXPECT_EQ(worker_.pool.idle_count(), 0u);
}

// A chunk the decoder refuses before anything of the answer left: the answer is still sluice's.
TEST_F(DownstreamResponseTest, AMalformedChunkBeforeTheHeadLeftIsAnswered502BadResponse) {
  configure();
  origin_.response = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwikiXX\r\n0\r\n\r\n";
  auto& client = connect();
  client.send("GET / HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: b-1\r\n\r\n");
  const auto response = next_response(client);
  EXPECT_EQ(response.substr(0, response.find("\r\n")), "HTTP/1.1 502 Bad Gateway");
  EXPECT_EQ(field_of(response, "Sluice-Error"), "bad response");
  EXPECT_EQ(response.find("wiki"), std::string::npos);
  EXPECT_EQ(worker_.pool.idle_count(), 0u);
}

}  // namespace
}  // namespace sluice::proxy
