// The downstream session's connection (src/proxy/downstream_session.cpp) over real loopback
// sockets, between the test's client and the test's origin: pipelined requests answered in
// order, Connection: close, malformed heads refused before anything reaches the origin, the head
// string reused by the next connection, the header timeout (on the worker's clock, through the
// tick's expire()) and a graceful shutdown. A request's way to the origin is in
// downstream_forward_test.cpp, the answer's way back in downstream_response_test.cpp.
#include "session_harness.hpp"

namespace sluice::proxy {
namespace {

using namespace session_test;

class DownstreamSessionTest : public SessionHarness {};

TEST_F(DownstreamSessionTest, AMalformedHeadIsAnswered400AndNothingOfItReachesTheOrigin) {
  configure();
  struct Case {
    std::string request;
    std::string error;  // Sluice-Error
  };
  const Case cases[] = {
      {"GET / HTTP/1.1\r\nHost: app.test\r\nX-Bad : 1\r\n\r\n", "space before colon"},
      {"POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
       "bad content-length"},
  };
  for (const auto& c : cases) {
    auto& client = connect();
    client.send(c.request);
    const auto response = next_response(client);
    EXPECT_EQ(response.substr(0, response.find("\r\n")), "HTTP/1.1 400 Bad Request") << c.request;
    EXPECT_EQ(field_of(response, "Sluice-Error"), c.error) << c.request;
    EXPECT_EQ(field_of(response, "Connection"), "close") << c.request;
    EXPECT_EQ(body_of(response), "400 Bad Request: " + c.error + "\n") << c.request;
    ASSERT_TRUE(run_until([&] { return client.ended; })) << c.request;
    EXPECT_EQ(client.end, net::error::eof) << c.request;  // half-closed after the answer
    EXPECT_EQ(client.unread(), "") << c.request;  // and nothing else came
    // The session lingers (its client may still be sending) until the client closes in turn.
    settle();
    const int before = ended_;
    error_code ignored;
    client.stream.close(ignored);
    ASSERT_TRUE(run_until([&] { return ended_ == before + 1; })) << c.request;
  }
  EXPECT_EQ(ended_, 2);
  settle();
  EXPECT_EQ(origin_.accepted(), 0u);
}

TEST_F(DownstreamSessionTest, ConnectionCloseIsAnsweredThenTheClientReadsEndOfStream) {
  configure();
  auto& client = connect();
  client.send(
      "GET /bye HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\nX-Request-Id: c-1\r\n\r\n");
  EXPECT_EQ(
      next_response(client),
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: c-1\r\nConnection: close\r\n\r\nok");
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  EXPECT_EQ(client.end, net::error::eof);
  EXPECT_EQ(client.unread(), "");
  EXPECT_TRUE(run_until([&] { return ended_ == 1; }));
  // Connection is hop-by-hop: the origin's connection is not the client's, and stays pooled.
  ASSERT_EQ(origin_.accepted(), 1u);
  EXPECT_EQ(origin_.connections[0]->received, forwarded_head("GET /bye HTTP/1.1", "c-1"));
  EXPECT_EQ(worker_.pool.idle_count(), 1u);
}

// A session's head output string goes back to the worker when the session ends, and the next
// connection's session writes its heads into it: a new connection does not grow a fresh string
// (StringPool, core/string_pool.hpp).
TEST_F(DownstreamSessionTest, AnEndedSessionLeavesItsHeadStringToTheNextConnection) {
  configure();
  EXPECT_EQ(worker_.head_strings.size(), 0u);
  for (int i = 1; i <= 2; ++i) {
    auto& client = connect();
    client.send("GET /bye HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n");
    ASSERT_TRUE(run_until([&] { return client.ended && ended_ == i; }));
    // Given back; and still one after the second connection: its session took the first's
    // string instead of growing a fresh one.
    EXPECT_EQ(worker_.head_strings.size(), 1u) << "connection " << i;
  }
}

TEST_F(DownstreamSessionTest, PipelinedRequestsAreAnsweredInOrderOverOneOriginConnection) {
  configure();
  auto& client = connect();
  client.send(
      "GET /p1 HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: p-1\r\n\r\n"
      "GET /p2 HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: p-2\r\n\r\n"
      "GET /p3 HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: p-3\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: p-1\r\n\r\nok");
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: p-2\r\n\r\nok");
  EXPECT_EQ(
      next_response(client),
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: p-3\r\nConnection: close\r\n\r\nok");
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  EXPECT_EQ(client.end, net::error::eof);
  ASSERT_EQ(origin_.accepted(), 1u);
  EXPECT_EQ(origin_.connections[0]->received, forwarded_head("GET /p1 HTTP/1.1", "p-1") +
                                                  forwarded_head("GET /p2 HTTP/1.1", "p-2") +
                                                  forwarded_head("GET /p3 HTTP/1.1", "p-3"));
}

TEST_F(DownstreamSessionTest, AHeadNotCompleteWithinHeaderTimeoutIsAnswered408OnTime) {
  configure("header_timeout = \"2s\"\n");
  auto& client = connect();
  client.send("GET /slow HTTP/1.1\r\nHost: app.te");
  ASSERT_TRUE(run_until([&] { return client.sent_all(); }));
  settle();  // the session has read the partial head
  clock_.advance(2s - 1ms);
  tick();
  settle();
  EXPECT_EQ(client.unread(), "");  // not before header_timeout
  EXPECT_FALSE(client.ended);
  clock_.advance(1ms);
  tick();
  const auto response = next_response(client);
  EXPECT_EQ(response.substr(0, response.find("\r\n")), "HTTP/1.1 408 Request Timeout");
  EXPECT_EQ(field_of(response, "Sluice-Error"), "header timeout");
  EXPECT_EQ(field_of(response, "Connection"), "close");
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  EXPECT_EQ(client.end, net::error::eof);
  // The rest of that head may still be coming: the session lingers, a second at most without a
  // byte, then closes.
  settle();
  EXPECT_EQ(ended_, 0);
  clock_.advance(1s);
  tick();
  ASSERT_TRUE(run_until([&] { return ended_ == 1; }));
  EXPECT_EQ(origin_.accepted(), 0u);
}

// Between requests a keep-alive connection waits under idle_timeout; the first byte of its next
// head starts header_timeout, which then bounds the rest of that head.
TEST_F(DownstreamSessionTest, TheNextHeadsFirstByteStartsItsHeaderTimeout) {
  configure("header_timeout = \"2s\"\nidle_timeout = \"60s\"\n");
  auto& client = connect();
  client.send("GET /first HTTP/1.1\r\nHost: app.test\r\n\r\n");
  const auto first = next_response(client);
  EXPECT_EQ(first.substr(0, first.find("\r\n")), "HTTP/1.1 200 OK");
  client.send("GET /second HTTP/1.1\r\nHost: app.te");
  ASSERT_TRUE(run_until([&] { return client.sent_all(); }));
  settle();  // the session has read the partial head
  clock_.advance(2s - 1ms);
  tick();
  settle();
  EXPECT_EQ(client.unread(), "");
  clock_.advance(1ms);
  tick();
  const auto response = next_response(client);
  EXPECT_EQ(response.substr(0, response.find("\r\n")), "HTTP/1.1 408 Request Timeout");
  EXPECT_EQ(field_of(response, "Sluice-Error"), "header timeout");
}

// A graceful shutdown closes idle keep-alive connections at once, but not one whose next head
// has begun to arrive: that request is on its way and gets its answer (then the close).
TEST_F(DownstreamSessionTest, AGracefulShutdownAnswersANextHeadThatHadBegunToArrive) {
  configure();
  auto& idle = connect();
  auto& sending = connect();
  for (auto* c : {&idle, &sending}) {
    c->send("GET /first HTTP/1.1\r\nHost: app.test\r\n\r\n");
    const auto first = next_response(*c);
    EXPECT_EQ(first.substr(0, first.find("\r\n")), "HTTP/1.1 200 OK");
  }
  sending.send("GET /second HTTP/1.1\r\nHost: app.te");
  ASSERT_TRUE(run_until([&] { return sending.sent_all(); }));
  settle();  // the session has read the partial head
  // As Worker's graceful shutdown: the flag, then close_if_idle() on every session.
  worker_.stopping = true;
  for (auto it = worker_.sessions.begin(); it != worker_.sessions.end();) (it++)->close_if_idle();
  ASSERT_TRUE(run_until([&] { return idle.ended; }));
  EXPECT_EQ(idle.unread(), "");  // closed without an answer: it had asked nothing
  sending.send("st\r\n\r\n");
  const auto second = next_response(sending);
  EXPECT_EQ(second.substr(0, second.find("\r\n")), "HTTP/1.1 200 OK");
  EXPECT_EQ(field_of(second, "Connection"), "close");
  ASSERT_TRUE(run_until([&] { return sending.ended; }));
}

}  // namespace
}  // namespace sluice::proxy
