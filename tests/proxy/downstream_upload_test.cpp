// Request bodies through a session (src/proxy/downstream_upload.cpp, and the body steps of
// src/proxy/downstream_session.cpp) over real loopback sockets: a Content-Length body larger than the relay
// block streams to the origin as it comes and arrives byte for byte; a chunked body that fits
// the relay block is validated whole and forwarded with a Content-Length, a larger one re-chunked
// with the same payload, a malformed one refused with nothing forwarded; Expect: 100-continue is
// answered hop by hop; an origin answering 413 before it read the body is heard (the upload
// stops, the client gets the 413 and the connection closes).
#include "session_harness.hpp"

#include <cstdio>

namespace sluice::proxy {
namespace {

using namespace session_test;

class DownstreamUploadTest : public SessionHarness {
protected:
  // `payload` in chunks of `chunk` bytes, with the last-chunk.
  static std::string chunked(std::string_view payload, std::size_t chunk) {
    std::string out;
    char size[16];
    for (std::size_t at = 0; at < payload.size(); at += chunk) {
      const auto piece = payload.substr(at, chunk);
      const int n = std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
      out.append(size, static_cast<std::size_t>(n));
      out.append(piece).append("\r\n");
    }
    return out.append("0\r\n\r\n");
  }
};

TEST_F(DownstreamUploadTest, AContentLengthBodyLargerThanTheRelayBlockStreamsToTheOriginByteForByte) {
  configure();
  origin_.response = "HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\ndone";
  const auto body = pattern(200 * 1024);  // over the relay block and retry.buffer: streamed
  auto& client = connect();
  client.send(
      "POST /up HTTP/1.1\r\nHost: app.test\r\nContent-Length: 204800\r\n"
      "X-Request-Id: up-1\r\n\r\n");
  client.send(body.substr(0, 50 * 1024));
  const auto head = forwarded_head("POST /up HTTP/1.1", "up-1", "Content-Length: 204800\r\n");
  // The first piece reaches the origin before the client sent the rest: streamed, not buffered.
  ASSERT_TRUE(run_until([&] {
    return origin_.accepted() == 1 &&
           origin_.connections[0]->received.size() == head.size() + 50 * 1024;
  }));
  for (std::size_t at = 50 * 1024; at < body.size(); at += 50 * 1024)
    client.send(body.substr(at, 50 * 1024));
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 201 Created\r\nContent-Length: 4\r\nX-Request-Id: up-1\r\n\r\ndone");
  const auto& got = origin_.connections[0]->received;
  EXPECT_EQ(got.substr(0, head.size()), head);
  ASSERT_EQ(got.size(), head.size() + body.size());
  EXPECT_TRUE(got.compare(head.size(), body.size(), body) == 0) << "the body arrived altered";
  EXPECT_EQ(origin_.connections[0]->answered, 1u);
  // Every byte was sent before the answer: the connection is reusable, and the client's too.
  EXPECT_EQ(worker_.pool.idle_count(), 1u);
  client.send("GET /after HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: up-2\r\n\r\n");
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 201 Created\r\nContent-Length: 4\r\nX-Request-Id: up-2\r\n\r\ndone");
  EXPECT_EQ(origin_.accepted(), 1u);
}

// A body that trickles in (a byte now and then, as a slow or hostile client sends it) costs a
// waiting session neither a relay block nor a buffer for an answer the origin has not begun:
// only its exchange's arena. It still arrives whole, and the answer is the origin's.
TEST_F(DownstreamUploadTest, ATricklingBodyWaitsHoldingNoRelayBlockAndNoAnswerBuffer) {
  configure();
  origin_.response = "HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\ndone";
  // Warm the pools with a first exchange on another connection: blocks come back to them.
  auto& warm = connect();
  warm.send("GET /warm HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: warm\r\n\r\n");
  ASSERT_FALSE(next_response(warm).empty());
  settle();
  // Spare blocks in both pools, so that a block taken shows as one fewer free.
  for (auto* pool : {&worker_.relay_blocks, &worker_.arena_blocks}) {
    char* spare[3] = {pool->acquire(), pool->acquire(), pool->acquire()};
    for (char* b : spare) pool->release(b);
  }
  const auto relays_free = worker_.relay_blocks.free_blocks();
  const auto arenas_free = worker_.arena_blocks.free_blocks();
  const auto body = pattern(200 * 1024);  // over the relay block and retry.buffer: streamed
  auto& client = connect();
  client.send("POST /up HTTP/1.1\r\nHost: app.test\r\nContent-Length: 204800\r\n"
              "X-Request-Id: slow\r\n\r\n" + body.substr(0, 16));
  const auto head = forwarded_head("POST /up HTTP/1.1", "slow", "Content-Length: 204800\r\n");
  // On the pooled connection of the first exchange, after its request, or on a new one.
  const auto before = origin_.connections[0]->received.size();
  const auto received = [&]() -> std::string_view {
    const auto& r = origin_.connections.back()->received;
    return origin_.accepted() == 1 ? std::string_view(r).substr(before) : std::string_view(r);
  };
  const auto arrived = [&](std::size_t n) {
    return run_until([&] { return received().size() == head.size() + n; });
  };
  ASSERT_TRUE(arrived(16));
  for (std::size_t at = 16; at < 19; ++at) {
    settle();
    EXPECT_EQ(worker_.relay_blocks.free_blocks(), relays_free) << "a relay block held while waiting";
    EXPECT_EQ(worker_.arena_blocks.free_blocks() + 1, arenas_free) << "more than the exchange's arena";
    client.send(body.substr(at, 1));
    ASSERT_TRUE(arrived(at + 1));
  }
  client.send(body.substr(19));
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 201 Created\r\nContent-Length: 4\r\nX-Request-Id: slow\r\n\r\ndone");
  const auto got = received();
  ASSERT_EQ(got.size(), head.size() + body.size());
  EXPECT_EQ(got.substr(0, head.size()), head);
  EXPECT_TRUE(got.substr(head.size()) == body) << "the body arrived altered";
}

TEST_F(DownstreamUploadTest, ASmallChunkedBodyIsValidatedWholeAndForwardedWithAContentLength) {
  configure();
  auto& client = connect();
  client.send(
      "POST /c HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n"
      "X-Request-Id: ch-1\r\n\r\n"
      "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n");
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: ch-1\r\n\r\nok");
  ASSERT_EQ(origin_.accepted(), 1u);
  // Transfer-Encoding, the chunk extension and the trailer are gone; the length frames it.
  EXPECT_EQ(
      origin_.connections[0]->received,
      "POST /c HTTP/1.1\r\nHost: app.test\r\nX-Forwarded-For: 127.0.0.1\r\n"
      "X-Forwarded-Proto: http\r\nX-Forwarded-Host: app.test\r\nX-Request-Id: ch-1\r\n"
      "Content-Length: 11\r\n\r\nhello world");
}

TEST_F(DownstreamUploadTest, AChunkedBodyLargerThanTheRelayBlockIsReChunkedWithTheSamePayload) {
  configure();
  const auto payload = pattern(100 * 1024);
  auto& client = connect();
  client.send(
      "POST /c HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n"
      "X-Request-Id: ch-2\r\n\r\n");
  client.send(chunked(payload, 10 * 1024));
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: ch-2\r\n\r\nok");
  ASSERT_EQ(origin_.accepted(), 1u);
  const auto& got = origin_.connections[0]->received;
  const std::string head =
      "POST /c HTTP/1.1\r\nHost: app.test\r\nX-Forwarded-For: 127.0.0.1\r\n"
      "X-Forwarded-Proto: http\r\nX-Forwarded-Host: app.test\r\nX-Request-Id: ch-2\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(got.substr(0, head.size()), head);
  std::string forwarded;
  EXPECT_EQ(message_size<true>(got, &forwarded), got.size());  // one whole request, nothing more
  EXPECT_EQ(forwarded.size(), payload.size());
  EXPECT_TRUE(forwarded == payload) << "the payload arrived altered";
  EXPECT_EQ(got.substr(got.size() - 5), "0\r\n\r\n");
}

TEST_F(DownstreamUploadTest, AMalformedChunkIsAnswered400AndNothingOfTheRequestIsForwarded) {
  configure();
  auto& client = connect();
  client.send(
      "POST /c HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n"
      "X-Request-Id: ch-3\r\n\r\n"
      "5\r\nhelloXX\r\n0\r\n\r\n");
  const auto response = next_response(client);
  EXPECT_EQ(response.substr(0, response.find("\r\n")), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(field_of(response, "Sluice-Error"), "bad chunk");
  EXPECT_EQ(field_of(response, "X-Request-Id"), "ch-3");
  EXPECT_EQ(field_of(response, "Connection"), "close");
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  settle();
  EXPECT_EQ(origin_.accepted(), 0u);  // refused before any attempt began
}

TEST_F(DownstreamUploadTest, ExpectContinueIsAnsweredHopByHopBeforeTheBodyIsRead) {
  configure();
  const auto body = pattern(100 * 1024);
  auto& client = connect();
  client.send(
      "POST /e HTTP/1.1\r\nHost: app.test\r\nContent-Length: 102400\r\nExpect: 100-continue\r\n"
      "X-Request-Id: e-1\r\n\r\n");
  EXPECT_EQ(next_response(client), "HTTP/1.1 100 Continue\r\n\r\n");  // the client waits for it
  client.send(body);
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: e-1\r\n\r\nok");
  ASSERT_EQ(origin_.accepted(), 1u);
  const auto head =
      forwarded_head("POST /e HTTP/1.1", "e-1", "Content-Length: 102400\r\n");  // no Expect
  const auto& got = origin_.connections[0]->received;
  EXPECT_EQ(got.substr(0, head.size()), head);
  ASSERT_EQ(got.size(), head.size() + body.size());
  EXPECT_TRUE(got.compare(head.size(), body.size(), body) == 0) << "the body arrived altered";
}

TEST_F(DownstreamUploadTest, AnEarly413FromTheOriginReachesTheClientAndStopsTheUpload) {
  configure();
  origin_.response =
      "HTTP/1.1 413 Content Too Large\r\nContent-Length: 8\r\nConnection: close\r\n\r\ntoo big\n";
  origin_.answer_at_head = true;  // answers the head, then reads until the proxy closes
  origin_.after = Origin::After::half_close;
  const auto body = pattern(1000);
  auto& client = connect();
  // 1000 of the 204800 bytes announced: the client is still to send the rest when the answer comes.
  client.send(
      "POST /big HTTP/1.1\r\nHost: app.test\r\nContent-Length: 204800\r\n"
      "X-Request-Id: big-1\r\n\r\n" +
      body);
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 413 Content Too Large\r\nContent-Length: 8\r\nX-Request-Id: big-1\r\n"
            "Connection: close\r\n\r\ntoo big\n");
  // The rest of the body will not be read: the connection closes after the answer.
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  EXPECT_EQ(client.end, net::error::eof);
  EXPECT_EQ(client.unread(), "");
  EXPECT_TRUE(run_until([&] { return ended_ == 1; }));
  // What the origin got: the head and at most what the client sent; its connection is not reused
  // (the request was cut mid-body), the proxy closed it.
  ASSERT_EQ(origin_.accepted(), 1u);
  auto& origin = *origin_.connections[0];
  ASSERT_TRUE(run_until([&] { return origin.ended; }));
  EXPECT_EQ(origin.end, net::error::eof);
  const auto head = forwarded_head("POST /big HTTP/1.1", "big-1", "Content-Length: 204800\r\n");
  ASSERT_GE(origin.received.size(), head.size());
  EXPECT_EQ(origin.received.substr(0, head.size()), head);
  EXPECT_LE(origin.received.size(), head.size() + body.size());
  EXPECT_EQ(origin.received.substr(head.size()),
            body.substr(0, origin.received.size() - head.size()));
  EXPECT_EQ(worker_.pool.idle_count(), 0u);
}

}  // namespace
}  // namespace sluice::proxy
