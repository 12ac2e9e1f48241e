// The listener side of a session's TLS (src/proxy/downstream_tls.cpp) over real loopback sockets,
// with certificates made at test time: a TLS client's handshake completes and its requests are
// forwarded with X-Forwarded-Proto: https; an answer with Connection: close ends with close_notify
// (not a truncation); bytes that are no ClientHello, and a handshake not completed within
// header_timeout (the worker's clock, through the tick's expire()), close the connection and
// count in the worker's tls_handshake_failures.
#include "session_harness.hpp"

#include <memory>
#include <optional>

#include "../tls/test_certs.hpp"

namespace sluice::proxy {
namespace {

using namespace session_test;

class DownstreamTlsTest : public SessionHarness {
protected:
  void SetUp() override {
    const auto leaf = certs_.leaf("proxy", "DNS:proxy.test,IP:127.0.0.1");
    // The TLS listener's own address is never bound here: connect(0) stands for its accept.
    configure("header_timeout = \"3s\"\n",
              "[[server.tls]]\nlisten = [\"127.0.0.1:8443\"]\n"
              "certificates = [{ cert = \"" +
                  leaf.cert + "\", key = \"" + leaf.key + "\" }]\n");
  }

  // The client's side of the handshake, verifying the listener's certificate for proxy.test;
  // reading starts once it completed. True: it did.
  bool handshake(Client& client) {
    client.stream.start_tls(client_tls_.context());
    EXPECT_TRUE(client_tls_.prepare(client.stream.tls()->native_handle(), "proxy.test"));
    // Shared with the handler, which may outlive this call when the handshake hangs.
    auto outcome = std::make_shared<std::optional<error_code>>();
    client.stream.async_handshake(net::ssl::stream_base::client,
                                  [outcome](error_code ec) { *outcome = ec; });
    run_until([&] { return outcome->has_value(); });
    EXPECT_TRUE(outcome->has_value()) << "handshake not completed";
    if (!outcome->has_value()) return false;
    EXPECT_FALSE(**outcome) << (*outcome)->message();
    if (**outcome) return false;
    client.start_reading();
    return true;
  }

  ::sluice::testing::TestCerts certs_;
  tls::ClientContext client_tls_{tls::ClientSettings{.verify = true, .ca_file = certs_.ca_file()}};
};

TEST_F(DownstreamTlsTest, ATlsClientIsServedAndTheOriginSeesHttps) {
  auto& client = connect(0);
  ASSERT_TRUE(handshake(client));
  // The session's side completes when it has read the client's Finished.
  EXPECT_TRUE(run_until([&] { return worker_.tls_handshakes.load() == 1; }));
  client.send("GET /s HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: t-1\r\n\r\n");
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: t-1\r\n\r\nok");
  client.send("GET /s2 HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: t-2\r\n\r\n");
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: t-2\r\n\r\nok");
  ASSERT_EQ(origin_.accepted(), 1u);  // plain towards the origin, and pooled
  EXPECT_EQ(origin_.connections[0]->received,
            forwarded_head("GET /s HTTP/1.1", "t-1", "", "127.0.0.1", "https") +
                forwarded_head("GET /s2 HTTP/1.1", "t-2", "", "127.0.0.1", "https"));
  EXPECT_EQ(worker_.tls_handshakes.load(), 1u);  // one handshake for the connection
  EXPECT_EQ(worker_.tls_handshake_failures.load(), 0u);
  EXPECT_FALSE(client.ended);
}

TEST_F(DownstreamTlsTest, AnAnswerWithConnectionCloseEndsWithCloseNotify) {
  auto& client = connect(0);
  ASSERT_TRUE(handshake(client));
  client.send("GET / HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\nX-Request-Id: t-3\r\n\r\n");
  EXPECT_EQ(
      next_response(client),
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: t-3\r\nConnection: close\r\n\r\nok");
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  // eof is a close_notify; a FIN without one would be ssl::error::stream_truncated.
  EXPECT_EQ(client.end, net::error::eof) << client.end.message();
  EXPECT_EQ(ended_, 0);  // the session waits for the client's own close_notify ...
  auto shut = std::make_shared<bool>(false);
  client.stream.async_tls_shutdown([shut](error_code) { *shut = true; });
  EXPECT_TRUE(run_until([&] { return ended_ == 1; }));  // ... and ends with it
  EXPECT_TRUE(run_until([&] { return *shut; }));
}

TEST_F(DownstreamTlsTest, BytesThatAreNoClientHelloCloseTheConnectionAndCountAFailure) {
  auto& client = connect(0);
  client.start_reading();  // plain: an HTTP request to the TLS listener
  client.send("GET / HTTP/1.1\r\nHost: app.test\r\n\r\n");
  ASSERT_TRUE(run_until([&] { return ended_ == 1; }));
  EXPECT_EQ(worker_.tls_handshake_failures.load(), 1u);
  EXPECT_EQ(worker_.tls_handshakes.load(), 0u);
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  EXPECT_EQ(client.received.find("HTTP/"), std::string::npos);  // no HTTP answer over plain TCP
  settle();
  EXPECT_EQ(origin_.accepted(), 0u);
}

TEST_F(DownstreamTlsTest, AHandshakeNotCompletedWithinHeaderTimeoutIsClosedAndCounted) {
  auto& client = connect(0);
  client.start_reading();  // connected, and silent
  settle();
  clock_.advance(3s - 1ms);
  tick();
  settle();
  EXPECT_EQ(ended_, 0);  // not before header_timeout
  EXPECT_FALSE(client.ended);
  clock_.advance(1ms);
  tick();
  ASSERT_TRUE(run_until([&] { return ended_ == 1; }));
  EXPECT_EQ(worker_.tls_handshake_failures.load(), 1u);
  EXPECT_EQ(worker_.tls_handshakes.load(), 0u);
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  EXPECT_EQ(client.end, net::error::eof);
  EXPECT_EQ(client.received, "");
}

}  // namespace
}  // namespace sluice::proxy
