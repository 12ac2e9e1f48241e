// The head index (http/head_index.hpp): its lookups and framing facts, its verdicts and spliced
// heads against today's path over a corpus of heads (the differential itself is the fuzz target
// fuzz/targets/head_index.cpp, run here on each head), and the splice's own output.
#include "oracle/beast_fields.hpp"
#include "sluice/http/head_index.hpp"

#include <cctype>
#include <string>

#include <gtest/gtest.h>

#include <string_view>

#include "indexed_request.hpp"
#include "sluice/http/request_id.hpp"
#include "targets/targets.hpp"

namespace sluice::http {
namespace {

using Result = HeadScan::Result;

void same_as_today_request(std::string_view head) {
  fuzz::throw_on_failure(true);
  try {
    fuzz::head_index_request(reinterpret_cast<const std::uint8_t*>(head.data()), head.size());
  } catch (const fuzz::InvariantBroken& e) {
    ADD_FAILURE() << e.what() << "\n  for: " << head;
  }
  fuzz::throw_on_failure(false);
}

void same_as_today_response(std::string_view head, std::uint8_t flags = 0) {
  std::string input(1, static_cast<char>(flags));
  input.append(head);
  fuzz::throw_on_failure(true);
  try {
    fuzz::head_index_response(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  } catch (const fuzz::InvariantBroken& e) {
    ADD_FAILURE() << e.what() << "\n  for: " << head;
  }
  fuzz::throw_on_failure(false);
}

constexpr std::string_view k_requests[] = {
    "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /x?y=1 HTTP/1.0\r\n\r\n",
    "GET http://b.example:8080/p HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET http://b.example/p HTTP/1.0\r\n\r\n",
    "GET http://u@b.example/p HTTP/1.1\r\nHost: a\r\n\r\n",
    "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET * HTTP/1.1\r\nHost: a\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    "POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nContent-Length:  7 \r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\t\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n",
    "POST /u HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    "POST /u HTTP/1.1\r\nHost: a\r\nTransfer_Encoding: chunked\r\n\r\n",
    "GET / HTTP/1.1\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
    "GET / HTTP/1.1\r\nHost:\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nConnection: ,,\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nConnection: a b\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nConnection: ;\r\nContent-Length: x\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\nConnection: ;\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nProxy-Connection: @\r\nHost: b\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    "GET / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nProxy-Connection: close\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nConnection: X-Secret, close, Cookie, Host, Content-Length\r\n"
    "X-Secret: 1\r\nCookie: c=1\r\nx-secret: 2\r\nContent-Length: 0\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nConnection: x-forwarded-for, Forwarded, Expect, X-Request-Id\r\n"
    "X-Forwarded-For: 10.0.0.1\r\nForwarded: for=10.0.0.1\r\nX-Request-Id: abc\r\nExpect: 100-continue\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\nClose: kept\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 10.0.0.1\r\nAccept: */*\r\nx-forwarded-for: 10.0.0.2, 10.0.0.3\r\n"
    "X-Forwarded-For:\r\nX-Forwarded-Proto: ftp\r\nX-Forwarded-Host: evil\r\nForwarded: for=1.2.3.4\r\n\r\n",
    "GET / HTTP/1.0\r\nX-Forwarded-Host: evil\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\"b\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: client-id-1\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: one\r\nX-Request-Id: two\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: \xff\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nExpect:\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
    "GET /chat HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n",
    "GET /chat HTTP/1.1\r\nHost: a\r\nConnection: upgrade, keep-alive\r\nUpgrade: h2c, websocket/13\r\n"
    "Upgrade: foo\r\nHTTP2-Settings: x\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n",
    "POST /chat HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\nContent-Length: 1\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nTE: trailers\r\nTrailer: X\r\nKeep-Alive: 1\r\nProxy-Authorization: b\r\n\r\n",
    "GET / HTTP/1.1\r\nhost:a\r\nUSER-AGENT:   spaced   \r\nX-Empty: \r\nX-Tab:\tt\t\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nSluice-Error: forged\r\n\r\n",
    // Rejected by the byte rules: the verdict must not change either.
    "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n",
    "GET / HTTP/1.1\nHost: a\r\n\r\n",
    "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
    "GET /#f HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET / HTTP/1.2\r\nHost: a\r\n\r\n",
    "G@T / HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\n",
    "GET / HTTP/1.1\r\nHo",
};

TEST(HeadIndex, RequestsAsToday) {
  for (const auto head : k_requests) same_as_today_request(head);
}

constexpr std::string_view k_responses[] = {
    "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: keep-alive\r\n\r\n",
    "HTTP/1.1 200 OK\r\nServer: x\r\nKeep-Alive: timeout=5\r\nContent-Length: 6\r\n\r\n",
    "HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.1 299 \r\n\r\n",
    "HTTP/1.0 200 OK\r\n\r\n",
    "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
    "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\nX: y\r\n\r\n",
    "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: gzip, chunked\r\nETag: \"e\"\r\n\r\n",
    "HTTP/1.1 200 OK\r\nConnection: close, X-Internal\r\nX-Internal: 1\r\nContent-Length: 1\r\n\r\n",
    "HTTP/1.1 200 OK\r\nSluice-Error: forged\r\nsluice-attempts: 9\r\nX-Request-Id: theirs\r\nContent-Length: 1\r\n\r\n",
    "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nVary: x\r\nSet-Cookie: b=2\r\nContent-Length: 1\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length:3 \r\nX-Pad:  p  \r\n\r\n",
    "HTTP/1.1 200 OK\r\nConnection: ;\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n",
    "HTTP/1.1 600 Bad\r\n\r\n",
    "HTTP/1.1 200 OK\r\nX: \x7f\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-",
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade, X-Drop\r\nX-Drop: 1\r\n"
    "Sluice-Error: e\r\nX-Request-Id: o\r\n\r\n",
    "HTTP/1.1 101 \r\nUpgrade: a, b\r\nUpgrade: c\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.1 103 \r\nLink: l\r\nKeep-Alive: 1\r\nSluice-X: y\r\nTransfer-Encoding: chunked\r\n\r\n",
    "HTTP/1.1 102 Processing\r\nX-Request-Id: theirs\r\n\r\n",
};

TEST(HeadIndex, ResponsesAsToday) {
  for (const auto head : k_responses)
    for (std::uint8_t flags = 0; flags < 32; ++flags) same_as_today_response(head, flags);
}

TEST(HeadIndex, LookupByKnownFieldAndByName) {
  constexpr std::string_view head =
      "GET /p HTTP/1.1\r\nHost: a.example\r\nX-One: 1\r\ncookie: c=1\r\nx-one: 2\r\nIdempotency-Key: k\r\n\r\n";
  RequestHead r;
  const auto v = index_request_head(head, {}, r);
  ASSERT_EQ(v.result, Result::complete);
  EXPECT_EQ(v.head_size, head.size());
  EXPECT_EQ(r.method(), "GET");
  EXPECT_EQ(r.target(), "/p");
  EXPECT_EQ(r.version(), 11u);
  EXPECT_EQ(r.host(), "a.example");
  EXPECT_EQ(r.fields().size(), 5u);
  EXPECT_EQ(r.value(KnownField::cookie), "c=1");
  EXPECT_EQ(r.value("COOKIE"), "c=1");
  EXPECT_EQ(r.value(KnownField::idempotency_key), "k");
  EXPECT_EQ(r.count("x-ONE"), 2u);
  EXPECT_EQ(r.value("X-One"), "1");
  EXPECT_EQ(r.find("X-Two"), nullptr);
  EXPECT_EQ(r.count(KnownField::expect), 0u);
  EXPECT_EQ(r.value(KnownField::expect), "");
  EXPECT_EQ(classify_field("X-FORWARDED-FOR"), KnownField::x_forwarded_for);
  EXPECT_EQ(classify_field("Sluice-Anything"), KnownField::sluice);
  EXPECT_EQ(classify_field("X-Forwarded-Fo"), KnownField::unknown);
}

// classify_field() compares a word at a time (8 or 4 bytes, overlapping at the end): every known
// name in any case, and every one-byte change of it, at every position.
TEST(HeadIndex, ClassifyFieldMatchesEveryKnownNameAndNoNearMiss) {
  const std::string_view names[] = {"host", "content-length", "transfer-encoding", "connection", "keep-alive",
                                    "proxy-connection", "upgrade", "expect", "te", "trailer", "http2-settings",
                                    "proxy-authorization", "proxy-authenticate", "x-forwarded-for",
                                    "x-forwarded-proto", "x-forwarded-host", "x-request-id", "forwarded",
                                    "idempotency-key", "cookie"};
  for (const auto name : names) {
    const auto k = classify_field(name);
    EXPECT_NE(k, KnownField::unknown) << name;
    std::string upper(name);
    for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(classify_field(upper), k) << upper;
    for (std::size_t i = 0; i < name.size(); ++i) {
      std::string near(name);
      near[i] = near[i] == 'q' ? 'z' : 'q';
      EXPECT_NE(classify_field(near), k) << near;
    }
    EXPECT_EQ(classify_field(std::string(name) + "x"), KnownField::unknown) << name;
  }
  EXPECT_EQ(classify_field("SLUICE-"), KnownField::sluice);
  EXPECT_EQ(classify_field("sluicE-error"), KnownField::sluice);
  EXPECT_EQ(classify_field("sluice"), KnownField::unknown);
  EXPECT_EQ(classify_field("sluicz-error"), KnownField::unknown);
}

TEST(HeadIndex, FramingFacts) {
  RequestHead r;
  ASSERT_EQ(index_request_head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n", {}, r).result,
            Result::complete);
  EXPECT_EQ(r.content_length(), 12u);
  EXPECT_FALSE(r.chunked());
  EXPECT_FALSE(r.body_done());
  EXPECT_TRUE(r.keep_alive());
  ASSERT_EQ(index_request_head("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                               "Connection: close\r\n\r\n", {}, r).result, Result::complete);
  EXPECT_TRUE(r.chunked());
  EXPECT_FALSE(r.content_length());
  EXPECT_FALSE(r.keep_alive());
  ResponseHead s;
  ASSERT_EQ(index_response_head("HTTP/1.1 200 OK\r\n\r\n", 4096, s).result, Result::complete);
  EXPECT_FALSE(s.keep_alive(false));  // read until close
  EXPECT_TRUE(s.keep_alive(true));
}

std::string many_fields(std::size_t n, std::string_view start) {
  std::string head(start);
  for (std::size_t i = 0; i < n; ++i) head += "X-F" + std::to_string(i) + ": v\r\n";
  return head + "\r\n";
}

// admit_request()'s refusals come on a head that parsed: flagged, with the index complete, as the
// session answers them as requests (their id, their log line); a head that did not parse is not.
TEST(HeadIndex, AdmissionRefusalsAreFlaggedOnAParsedHead) {
  RequestHead r;
  const std::string_view big = "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n";
  auto v = index_request_head(big, {16 * 1024, 8 * 1024, 5}, r);
  EXPECT_EQ(v.result, Result::invalid);
  EXPECT_EQ(v.rejection.status, 413u);
  EXPECT_TRUE(v.admission);
  EXPECT_EQ(v.head_size, big.size());
  EXPECT_EQ(r.target(), "/up");
  EXPECT_TRUE(r.keep_alive());
  v = index_request_head("CONNECT b:443 HTTP/1.1\r\nHost: b:443\r\n\r\n", {}, r);
  EXPECT_EQ(v.rejection.status, 501u);
  EXPECT_TRUE(v.admission);
  v = index_request_head("GET http://u@b.example/p HTTP/1.1\r\nHost: a\r\n\r\n", {}, r);
  EXPECT_EQ(v.rejection.status, 400u);
  EXPECT_TRUE(v.admission);
  v = index_request_head("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", {}, r);
  EXPECT_EQ(v.rejection.status, 400u);
  EXPECT_FALSE(v.admission);
  EXPECT_FALSE(index_request_head(big, {}, r).admission);
}

TEST(HeadIndex, AboveCapacityIsTooLarge) {
  RequestHead r;
  const auto fits = many_fields(HeadIndex::capacity - 1, "GET / HTTP/1.1\r\nHost: a\r\n");
  EXPECT_EQ(index_request_head(fits, {}, r).result, Result::complete);
  const auto over = many_fields(HeadIndex::capacity, "GET / HTTP/1.1\r\nHost: a\r\n");
  const auto v = index_request_head(over, {}, r);
  EXPECT_EQ(v.result, Result::invalid);
  EXPECT_EQ(v.rejection.status, 431u);
  EXPECT_EQ(v.rejection.reason, "header too large");
  ResponseHead s;
  EXPECT_EQ(index_response_head(many_fields(HeadIndex::capacity + 1, "HTTP/1.1 200 OK\r\n"), 1 << 16, s).result,
            Result::invalid);
  // The boundary on the response side too: exactly capacity lines pass.
  EXPECT_EQ(index_response_head(many_fields(HeadIndex::capacity, "HTTP/1.1 200 OK\r\n"), 1 << 16, s).result,
            Result::complete);
  EXPECT_EQ(HeadIndex::capacity, 101u);  // the limit docs/http.md states (HAProxy's tune.http.maxhdr)
}

TEST(HeadIndex, SplicedRequestKeepsTheClientsLines) {
  constexpr std::string_view head =
      "GET /a HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n"
      "User-Agent:  ua \r\nX-Forwarded-For: 10.0.0.1\r\n\r\n";
  RequestHead r;
  ASSERT_EQ(index_request_head(head, {}, r).result, Result::complete);
  std::string out;
  splice_request_head(out, r, {{"192.0.2.1", "http", "id-1"}});
  EXPECT_EQ(out,
            "GET /a HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nUser-Agent: ua\r\n"
            "X-Forwarded-For: 10.0.0.1, 192.0.2.1\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: a\r\n"
            "X-Request-Id: id-1\r\n\r\n");
}

TEST(HeadIndex, SplicedRequestWithRewriteRulesAndChunkedFraming) {
  constexpr std::string_view head =
      "POST /products/x HTTP/1.1\r\nHost: a\r\nCookie: c\r\nTransfer-Encoding: chunked\r\n\r\n";
  RequestHead r;
  ASSERT_EQ(index_request_head(head, {}, r).result, Result::complete);
  HeaderRules rules;
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  rules.apply(std::vector<std::string>{"Cookie", "X-Forwarded-Proto"}, Pairs{{"X-Env", "prod"}}, Pairs{});
  const Variables vars;
  const PathRewrite rewrite{10, "/"};
  std::string out;
  splice_request_head(out, r, {{"192.0.2.1", "http", ""}, true, &rewrite, &rules, &vars});
  EXPECT_EQ(out,
            "POST /x HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 192.0.2.1\r\nX-Forwarded-Host: a\r\n"
            "X-Env: prod\r\nTransfer-Encoding: chunked\r\n\r\n");
  // The same body kept whole (DownstreamSession::keep_chunked_body): sent with its length instead.
  RequestSplice kept{{"192.0.2.1", "http", ""}};
  kept.content_length = 42;
  out.clear();
  splice_request_head(out, r, kept);
  EXPECT_EQ(out,
            "POST /products/x HTTP/1.1\r\nHost: a\r\nCookie: c\r\nX-Forwarded-For: 192.0.2.1\r\n"
            "X-Forwarded-Proto: http\r\nX-Forwarded-Host: a\r\nContent-Length: 42\r\n\r\n");
}

TEST(HeadIndex, SplicedResponse) {
  constexpr std::string_view head =
      "HTTP/1.1 200 OK\r\nDate: d\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
      "Transfer-Encoding: chunked\r\nSluice-Error: x\r\nETag: \"e\"\r\n\r\n";
  ResponseHead s;
  ASSERT_EQ(index_response_head(head, 4096, s).result, Result::complete);
  const auto plan = plan_response(s, false, 10, true);
  EXPECT_TRUE(plan.chunked_in);
  EXPECT_FALSE(plan.keep_alive);  // an HTTP/1.0 client learns the end from the close
  std::string out;
  splice_response_head(out, s, {"id-1", plan, 10, 3});
  EXPECT_EQ(out,
            "HTTP/1.1 200 OK\r\nDate: d\r\nETag: \"e\"\r\nX-Request-Id: id-1\r\nSluice-Attempts: 3\r\n"
            "Connection: close\r\n\r\n");
}

TEST(HeadIndex, HopByHopListMatchesRewrite) {
  // is_hop_by_hop(KnownField) is strip_hop_by_hop()'s list: every name it strips, nothing else.
  Fields f;
  for (const auto name : {"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
                          "Transfer-Encoding", "Upgrade", "HTTP2-Settings"}) {
    EXPECT_TRUE(is_hop_by_hop(classify_field(name))) << name;
    f.insert(name, "v");
  }
  for (const auto name : {"Host", "Content-Length", "Expect", "Proxy-Authorization", "Proxy-Authenticate",
                          "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Request-Id",
                          "Forwarded", "Idempotency-Key", "Cookie", "Sluice-X"}) {
    EXPECT_FALSE(is_hop_by_hop(classify_field(name))) << name;
    f.insert(name, "v");
  }
  strip_hop_by_hop(f);
  EXPECT_EQ(std::distance(f.begin(), f.end()), 13);
}

}  // namespace
}  // namespace sluice::http

namespace sluice::http {
namespace {

TEST(HeadIndex, SwitchAndInterimHeads) {
  RequestHead req;
  ASSERT_EQ(index_request_head("GET /c HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket, foo/2\r\n\r\n",
                               {}, req).result, HeadScan::Result::complete);
  EXPECT_TRUE(wants_upgrade(req, false));
  EXPECT_FALSE(wants_upgrade(req, true));  // a body would be read in the old protocol
  ResponseHead res;
  ASSERT_EQ(index_response_head("HTTP/1.1 101 \r\nUpgrade: WebSocket\r\nConnection: Upgrade\r\nSluice-X: 1\r\n\r\n",
                                4096, res).result, HeadScan::Result::complete);
  EXPECT_TRUE(valid_switch(res, req));
  // The offer alone (no Connection: upgrade), then with a second Upgrade line.
  Fields fields;
  fields.insert(boost::beast::http::field::upgrade, "websocket, foo/2");
  const auto offer = testing::indexed(fields);
  EXPECT_TRUE(valid_switch(res, offer->head));
  fields.insert(boost::beast::http::field::upgrade, "H2C");  // offered on a second line
  const auto offer2 = testing::indexed(fields);
  std::string out;
  splice_response_head(out, res, {"id", {}, 11, 1, ResponseSplice::Kind::switching});
  EXPECT_EQ(out, "HTTP/1.1 101 Switching Protocols\r\nSluice-X: 1\r\nUpgrade: WebSocket\r\nConnection: upgrade\r\n"
                 "X-Request-Id: id\r\n\r\n");
  ASSERT_EQ(index_response_head("HTTP/1.1 101 OK\r\nUpgrade: h2c\r\n\r\n", 4096, res).result, HeadScan::Result::complete);
  EXPECT_FALSE(valid_switch(res, req));  // not offered
  EXPECT_FALSE(valid_switch(res, offer->head));
  EXPECT_TRUE(valid_switch(res, offer2->head));  // offered on the second line
  ASSERT_EQ(index_response_head("HTTP/1.1 101 OK\r\nUpgrade: websocket, h2c\r\n\r\n", 4096, res).result,
            HeadScan::Result::complete);
  EXPECT_TRUE(valid_switch(res, offer2->head));
  EXPECT_FALSE(valid_switch(res, req));  // h2c not offered
  ASSERT_EQ(index_response_head("HTTP/1.1 101 OK\r\n\r\n", 4096, res).result, HeadScan::Result::complete);
  EXPECT_FALSE(valid_switch(res, offer2->head));  // no Upgrade: no switch
  ASSERT_EQ(index_response_head("HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\nContent-Length: 0\r\n"
                                "X-Request-Id: o\r\n\r\n", 4096, res).result, HeadScan::Result::complete);
  out.clear();
  splice_response_head(out, res, {"id", {}, 11, 1, ResponseSplice::Kind::interim});
  EXPECT_EQ(out, "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\nX-Request-Id: o\r\n\r\n");
}

}  // namespace
}  // namespace sluice::http

namespace sluice::http {
namespace {

TEST(HeadIndex, NamesAndValuesLongerThan64KiB) {
  // max_header_bytes may be up to 1 MiB: so may a name or a value be.
  const std::string name(70'000, 'n');
  const std::string value(70'000, 'v');
  const std::string head = "GET / HTTP/1.1\r\nHost: a\r\n" + name + ": " + value + "\r\n\r\n";
  RequestHead r;
  const auto v = index_request_head(head, {1 << 20, 8192, 0}, r);
  ASSERT_EQ(v.result, HeadScan::Result::complete);
  ASSERT_EQ(r.fields().size(), 2u);
  EXPECT_EQ(r.name(r.fields()[1]).size(), name.size());
  EXPECT_EQ(r.value(name), value);
}

}  // namespace
}  // namespace sluice::http

namespace sluice::http {
namespace {

// RFC 9110 §6.6.1: sluice's Date where the origin sent none; the origin's own kept; none on 1xx.
TEST(HeadIndex, SplicedDateOnlyWhereTheOriginSentNone) {
  constexpr std::string_view now = "Sun, 06 Nov 1994 08:49:37 GMT";
  ResponseHead res;
  ASSERT_EQ(index_response_head("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 4096, res).result, Result::complete);
  ResponseSplice edits{"id", plan_response(res, false, 11, true), 11, 1};
  edits.date = now;
  std::string out;
  splice_response_head(out, res, edits);
  EXPECT_EQ(out, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Request-Id: id\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n");
  ASSERT_EQ(index_response_head("HTTP/1.1 200 OK\r\nDATE: Mon, 07 Nov 1994 00:00:00 GMT\r\nContent-Length: 0\r\n\r\n", 4096,
                                res).result, Result::complete);
  out.clear();
  splice_response_head(out, res, edits);
  EXPECT_EQ(out, "HTTP/1.1 200 OK\r\nDATE: Mon, 07 Nov 1994 00:00:00 GMT\r\nContent-Length: 0\r\nX-Request-Id: id\r\n\r\n");
  ASSERT_EQ(index_response_head("HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n", 4096, res).result, Result::complete);
  out.clear();
  edits.kind = ResponseSplice::Kind::interim;
  splice_response_head(out, res, edits);
  EXPECT_EQ(out, "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n");
}

}  // namespace
}  // namespace sluice::http

namespace sluice::http {
namespace {

// A body the proxy codes (compression): Content-Length and Accept-Ranges go, the first strong
// ETag is weakened, Content-Encoding and Vary come, and the body goes chunked.
TEST(HeadIndex, SplicedForACodedBody) {
  ResponseHead res;
  ASSERT_EQ(index_response_head("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5000\r\n"
                                "accept-ranges: bytes\r\netag: \"a\"\r\nETag: \"b\"\r\n\r\n",
                                4096, res).result,
            Result::complete);
  auto plan = plan_response(res, false, 11, true);
  plan.chunked_out = true;
  ResponseSplice edits{"id", plan, 11, 1};
  edits.content_encoding = "zstd";
  edits.drop_length = edits.drop_accept_ranges = edits.weaken_etag = edits.add_vary = true;
  std::string out;
  splice_response_head(out, res, edits);
  EXPECT_EQ(out,
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\netag: W/\"a\"\r\nETag: \"b\"\r\n"
            "Content-Encoding: zstd\r\nVary: Accept-Encoding\r\nX-Request-Id: id\r\n"
            "Transfer-Encoding: chunked\r\n\r\n");
  // A weak ETag stays as it is; without the edits the head is the origin's.
  ASSERT_EQ(index_response_head("HTTP/1.1 200 OK\r\nETag: W/\"a\"\r\nContent-Length: 0\r\n\r\n", 4096, res).result,
            Result::complete);
  out.clear();
  splice_response_head(out, res, edits);
  EXPECT_EQ(out, "HTTP/1.1 200 OK\r\nETag: W/\"a\"\r\nContent-Encoding: zstd\r\nVary: Accept-Encoding\r\n"
                 "X-Request-Id: id\r\nTransfer-Encoding: chunked\r\n\r\n");
}

}  // namespace
}  // namespace sluice::http
