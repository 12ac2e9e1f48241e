// A request's way to the origin through the downstream session (src/proxy/downstream_forward.cpp)
// over real loopback sockets: what the origin receives (X-Forwarded-*, X-Request-Id), the origin
// connection pooled after a whole answer and taken again, a pooled connection the origin closed
// replaced by a new one without a failed attempt, an origin that refuses connections.
#include "session_harness.hpp"

namespace sluice::proxy {
namespace {

using namespace session_test;

class DownstreamForwardTest : public SessionHarness {};

TEST_F(DownstreamForwardTest, AGetIsForwardedWithXForwardedForAndTheOriginConnectionIsPooled) {
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

// The origin closes its connection right behind a keep-alive answer. The pool must see the FIN:
// a GET sent into the dead connection would be retried, but a POST without Idempotency-Key would
// not (it may have reached the origin), and would be answered 502. Both must succeed, each over a
// new connection, with no failed attempt.
TEST_F(DownstreamForwardTest, AnOriginThatClosesAfterItsAnswerGetsTheNextRequestOnANewConnection) {
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

TEST_F(DownstreamForwardTest, AnOriginRefusingConnectionsIsAnswered502NamingTheFailure) {
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
