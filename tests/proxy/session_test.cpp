// A session (src/proxy/session.cpp) over real loopback sockets, between the test's client and
// the test's origin: what the origin receives of a request (X-Forwarded-*, X-Request-Id), the
// answer relayed to the client, keep-alive on both sides (the pooled origin connection, one the
// origin closed after its answer), pipelined requests answered in order, Connection: close,
// malformed heads refused before anything reaches the origin, the header timeout (on the
// worker's clock, through the tick's expire()) and an origin that refuses connections.
#include "session_harness.hpp"

namespace sluice::proxy {
namespace {

using namespace session_test;

class SessionTest : public SessionHarness {};

TEST_F(SessionTest, AGetIsForwardedWithXForwardedForAndTheOriginConnectionIsPooled) {
  configure();
  origin_.response = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Origin: a\r\n\r\nhello";
  auto& client = connect();
  client.send(
      "GET /a?b=1 HTTP/1.1\r\nHost: app.test\r\nAccept: */*\r\nX-Request-Id: req-1\r\n\r\n");
  EXPECT_EQ(
      next_response(client),
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Origin: a\r\nX-Request-Id: req-1\r\n\r\nhello");
  // The answer was read whole and said nothing against keep-alive: its connection is pooled.
  EXPECT_EQ(worker_.pool.idle_count(), 1u);

  client.send("GET /second HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: req-2\r\n\r\n");
  EXPECT_EQ(
      next_response(client),
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Origin: a\r\nX-Request-Id: req-2\r\n\r\nhello");
  ASSERT_EQ(origin_.accepted(), 1u);  // the second request took the pooled connection
  EXPECT_EQ(origin_.connections[0]->received,
            forwarded_head("GET /a?b=1 HTTP/1.1", "req-1", "Accept: */*\r\n") +
                forwarded_head("GET /second HTTP/1.1", "req-2"));
  EXPECT_EQ(worker_.pool.idle_count(), 1u);
  EXPECT_FALSE(client.ended);  // both sides keep their connections
  EXPECT_FALSE(origin_.connections[0]->ended);
  EXPECT_EQ(ended_, 0);
}

TEST_F(SessionTest, AMalformedHeadIsAnswered400AndNothingOfItReachesTheOrigin) {
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
    EXPECT_EQ(client.end, net::error::eof) << c.request;  // closed after the answer
    EXPECT_EQ(client.unread(), "") << c.request;  // and nothing else came
  }
  EXPECT_EQ(ended_, 2);
  settle();
  EXPECT_EQ(origin_.accepted(), 0u);
}

TEST_F(SessionTest, ConnectionCloseIsAnsweredThenTheClientReadsEndOfStream) {
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
TEST_F(SessionTest, AnEndedSessionLeavesItsHeadStringToTheNextConnection) {
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

// The origin closes its connection right behind a keep-alive answer. The pool must see the FIN:
// a GET sent into the dead connection would be retried, but a POST without Idempotency-Key would
// not (it may have reached the origin), and would be answered 502. Both must succeed, each over a
// new connection, with no failed attempt.
TEST_F(SessionTest, AnOriginThatClosesAfterItsAnswerGetsTheNextRequestOnANewConnection) {
  configure();
  origin_.after = Origin::After::close;  // keep-alive by its head, FIN right behind the answer
  auto& client = connect();
  client.send("GET /one HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: f-1\r\n\r\n");
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: f-1\r\n\r\nok");
  client.send("GET /two HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: f-2\r\n\r\n");
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: f-2\r\n\r\nok");
  client.send(
      "POST /three HTTP/1.1\r\nHost: app.test\r\nContent-Length: 4\r\nX-Request-Id: f-3\r\n\r\n"
      "data");
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: f-3\r\n\r\nok");
  ASSERT_EQ(origin_.accepted(), 3u);
  EXPECT_EQ(origin_.connections[0]->received, forwarded_head("GET /one HTTP/1.1", "f-1"));
  EXPECT_EQ(origin_.connections[1]->received, forwarded_head("GET /two HTTP/1.1", "f-2"));
  EXPECT_EQ(origin_.connections[2]->received,
            forwarded_head("POST /three HTTP/1.1", "f-3", "Content-Length: 4\r\n") + "data");
  EXPECT_FALSE(client.ended);
  // No attempt failed: none retried, none counted against the server.
  const auto& counters = worker_.snapshot->upstreams[0]->endpoints()[0]->counters(0);
  EXPECT_EQ(counters.failures.load(), 0u);
  for (const auto& retried : counters.retries) EXPECT_EQ(retried.load(), 0u);
  EXPECT_EQ(counters.responses[2].load(), 3u);
}

TEST_F(SessionTest, PipelinedRequestsAreAnsweredInOrderOverOneOriginConnection) {
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

TEST_F(SessionTest, AHeadNotCompleteWithinHeaderTimeoutIsAnswered408OnTime) {
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
  EXPECT_EQ(ended_, 1);
  EXPECT_EQ(origin_.accepted(), 0u);
}

// Between requests a keep-alive connection waits under idle_timeout; the first byte of its next
// head starts header_timeout, which then bounds the rest of that head.
TEST_F(SessionTest, TheNextHeadsFirstByteStartsItsHeaderTimeout) {
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
TEST_F(SessionTest, AGracefulShutdownAnswersANextHeadThatHadBegunToArrive) {
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

TEST_F(SessionTest, AnOriginRefusingConnectionsIsAnswered502NamingTheFailure) {
  configure();
  origin_.stop_listening();
  auto& client = connect();
  client.send("GET / HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: r-1\r\n\r\n");
  const auto response = next_response(client);
  EXPECT_EQ(response.substr(0, response.find("\r\n")), "HTTP/1.1 502 Bad Gateway");
  EXPECT_EQ(field_of(response, "Sluice-Error"),
            "connect refused; not retried: no other server to try");
  EXPECT_EQ(field_of(response, "X-Request-Id"), "r-1");  // the answer carries its request's id
  EXPECT_EQ(field_of(response, "Connection"), "close");
  const auto& counters = worker_.snapshot->upstreams[0]->endpoints()[0]->counters(0);
  EXPECT_EQ(counters.failures.load(), 1u);  // counted against the server, once
  EXPECT_EQ(counters.retry_skips[static_cast<std::size_t>(RetrySkip::no_other_server)].load(), 1u);
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  EXPECT_EQ(ended_, 1);
}

}  // namespace
}  // namespace sluice::proxy
