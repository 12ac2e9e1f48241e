// The edge steps of a session (src/proxy/downstream_edge.cpp) over real loopback sockets: the PROXY
// protocol header on a proxy_protocol listener (accepted only from server.trusted_proxies, read up
// to its last byte so that the request behind it is parsed as sent, refused and counted when the
// peer is not trusted or the header is malformed), a "PROXY" line on a listener without it, and
// the request's client address (X-Forwarded-For believed only from a trusted peer) as a route's
// deny list sees it.
#include "session_harness.hpp"

#include "sluice/proxy/proxy_protocol.hpp"

namespace sluice::proxy {
namespace {

using namespace session_test;

class DownstreamEdgeTest : public SessionHarness {
protected:
  // This worker's refusals of one kind so far (the counters are the process's, per worker).
  static std::uint64_t rejected(std::atomic<std::uint64_t> ProxyProtocolRejections::*kind) {
    return (proxy_protocol_rejections(0).*kind).load();
  }
};

TEST_F(DownstreamEdgeTest, AProxyHeaderFromATrustedPeerNamesTheClient) {
  configure("proxy_protocol = true\ntrusted_proxies = [\"127.0.0.1/32\"]\n");
  auto& client = connect();
  // The header and the request in one write: the request must be left for the HTTP parser.
  client.send(
      "PROXY TCP4 192.0.2.7 192.0.2.1 5000 80\r\n"
      "GET /pp HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: pp-1\r\n\r\n");
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: pp-1\r\n\r\nok");
  ASSERT_EQ(origin_.accepted(), 1u);
  EXPECT_EQ(origin_.connections[0]->received,
            forwarded_head("GET /pp HTTP/1.1", "pp-1", "", "192.0.2.7"));
  // The header comes once, first: a second request is a request like any other.
  client.send("GET /pp2 HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: pp-2\r\n\r\n");
  EXPECT_EQ(next_response(client),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: pp-2\r\n\r\nok");
  EXPECT_EQ(origin_.connections[0]->received,
            forwarded_head("GET /pp HTTP/1.1", "pp-1", "", "192.0.2.7") +
                forwarded_head("GET /pp2 HTTP/1.1", "pp-2", "", "192.0.2.7"));
}

TEST_F(DownstreamEdgeTest, TheAddressAProxyHeaderNamesIsWhatARouteDenies) {
  configure("proxy_protocol = true\ntrusted_proxies = [\"127.0.0.1/32\"]\n",
            "[[route]]\nupstream = \"app\"\ndeny = [\"192.0.2.7/32\"]\n");
  auto& denied = connect();
  denied.send(
      "PROXY TCP4 192.0.2.7 192.0.2.1 5000 80\r\n"
      "GET / HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: d-1\r\n\r\n");
  EXPECT_EQ(
      next_response(denied),
      "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 45\r\n"
      "Sluice-Error: forbidden by route allow/deny\r\nX-Request-Id: d-1\r\nConnection: close\r\n"
      "\r\n"
      "403 Forbidden: forbidden by route allow/deny\n");
  auto& allowed = connect();  // the same peer, naming another client
  allowed.send(
      "PROXY TCP4 192.0.2.8 192.0.2.1 5000 80\r\n"
      "GET / HTTP/1.1\r\nHost: app.test\r\nX-Request-Id: d-2\r\n\r\n");
  EXPECT_EQ(next_response(allowed),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: d-2\r\n\r\nok");
  ASSERT_EQ(origin_.accepted(), 1u);
  EXPECT_EQ(origin_.connections[0]->received,
            forwarded_head("GET / HTTP/1.1", "d-2", "", "192.0.2.8"));
}

TEST_F(DownstreamEdgeTest, APeerNotInTrustedProxiesIsRefusedBeforeAnyByteIsRead) {
  configure("proxy_protocol = true\ntrusted_proxies = [\"10.0.0.0/8\"]\n");
  const auto untrusted = rejected(&ProxyProtocolRejections::untrusted);
  const auto malformed = rejected(&ProxyProtocolRejections::malformed);
  auto& client = connect();
  client.send("PROXY TCP4 192.0.2.7 192.0.2.1 5000 80\r\nGET / HTTP/1.1\r\nHost: app.test\r\n\r\n");
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  EXPECT_EQ(client.received, "");  // closed, not answered
  EXPECT_EQ(ended_, 1);
  EXPECT_EQ(rejected(&ProxyProtocolRejections::untrusted), untrusted + 1);
  EXPECT_EQ(rejected(&ProxyProtocolRejections::malformed), malformed);
  settle();
  EXPECT_EQ(origin_.accepted(), 0u);
}

TEST_F(DownstreamEdgeTest, AMalformedProxyHeaderIsRefusedAndCounted) {
  configure("proxy_protocol = true\ntrusted_proxies = [\"127.0.0.1/32\"]\n");
  const auto untrusted = rejected(&ProxyProtocolRejections::untrusted);
  const auto malformed = rejected(&ProxyProtocolRejections::malformed);
  // A request where the header should be, and a header with a family mismatch.
  for (const std::string first :
       {"GET / HTTP/1.1\r\nHost: app.test\r\n\r\n",
        "PROXY TCP4 2001:db8::1 192.0.2.1 5000 80\r\nGET / HTTP/1.1\r\n\r\n"}) {
    auto& client = connect();
    client.send(first);
    ASSERT_TRUE(run_until([&] { return client.ended; })) << first;
    EXPECT_EQ(client.received, "") << first;
  }
  EXPECT_EQ(ended_, 2);
  EXPECT_EQ(rejected(&ProxyProtocolRejections::malformed), malformed + 2);
  EXPECT_EQ(rejected(&ProxyProtocolRejections::untrusted), untrusted);
  settle();
  EXPECT_EQ(origin_.accepted(), 0u);
}

TEST_F(DownstreamEdgeTest, AConnectionClosedBeforeItsFirstByteIsNotCounted) {
  configure("proxy_protocol = true\ntrusted_proxies = [\"127.0.0.1/32\"]\n");
  const auto malformed = rejected(&ProxyProtocolRejections::malformed);
  const auto timeout = rejected(&ProxyProtocolRejections::timeout);
  auto& client = connect();  // a balancer's TCP health check: connect, close
  error_code ignored;
  client.stream.shutdown(tcp::socket::shutdown_send, ignored);
  ASSERT_TRUE(run_until([&] { return ended_ == 1; }));
  EXPECT_EQ(rejected(&ProxyProtocolRejections::malformed), malformed);
  EXPECT_EQ(rejected(&ProxyProtocolRejections::timeout), timeout);
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  EXPECT_EQ(client.end, net::error::eof);
  EXPECT_EQ(client.received, "");
}

TEST_F(DownstreamEdgeTest, WithoutProxyProtocolAProxyLineIsAMalformedRequest) {
  configure(
      "trusted_proxies = [\"127.0.0.1/32\"]\n");  // trusted, but the listener expects no header
  auto& client = connect();
  client.send("PROXY TCP4 192.0.2.7 192.0.2.1 5000 80\r\nGET / HTTP/1.1\r\nHost: app.test\r\n\r\n");
  const auto response = next_response(client);
  EXPECT_EQ(response.substr(0, response.find("\r\n")), "HTTP/1.1 400 Bad Request");
  // "PROXY" is a method's token and "TCP4" a target's; what follows is no HTTP version.
  EXPECT_EQ(field_of(response, "Sluice-Error"), "bad version");
  EXPECT_EQ(field_of(response, "Connection"), "close");
  ASSERT_TRUE(run_until([&] { return client.ended; }));
  settle();
  EXPECT_EQ(origin_.accepted(), 0u);
}

TEST_F(DownstreamEdgeTest, XForwardedForIsBelievedOnlyFromATrustedPeer) {
  const std::string deny = "[[route]]\nupstream = \"app\"\ndeny = [\"198.51.100.9/32\"]\n";
  const std::string request =
      "GET / HTTP/1.1\r\nHost: app.test\r\nX-Forwarded-For: 198.51.100.9\r\n"
      "X-Request-Id: x-1\r\n\r\n";
  // An untrusted peer's claim is not its address: the route lets it in, and the origin sees the
  // claim with the real peer appended.
  configure("", deny);
  auto& untrusted = connect();
  untrusted.send(request);
  EXPECT_EQ(next_response(untrusted),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Request-Id: x-1\r\n\r\nok");
  ASSERT_EQ(origin_.accepted(), 1u);
  EXPECT_EQ(origin_.connections[0]->received,
            forwarded_head("GET / HTTP/1.1", "x-1", "", "198.51.100.9, 127.0.0.1"));
  // From a trusted peer, the client is the last untrusted X-Forwarded-For entry: denied.
  configure("trusted_proxies = [\"127.0.0.1/32\"]\n", deny);
  auto& trusted = connect();
  trusted.send(request);
  const auto response = next_response(trusted);
  EXPECT_EQ(response.substr(0, response.find("\r\n")), "HTTP/1.1 403 Forbidden");
  EXPECT_EQ(field_of(response, "Sluice-Error"), "forbidden by route allow/deny");
  EXPECT_EQ(field_of(response, "X-Request-Id"), "x-1");
  settle();
  EXPECT_EQ(origin_.accepted(), 1u);
}

}  // namespace
}  // namespace sluice::proxy
