#include "sluice/proxy/error_response.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sluice::proxy {
namespace {

std::string format(const ProxyError& e, std::string_view id, bool keep) {
  char buf[1024];
  return std::string(buf, format_error(buf, e, id, keep));
}

TEST(ErrorResponse, CarriesStatusReasonHeaderAndBody) {
  const auto r = format({502, "connect refused"}, "abc", false);
  EXPECT_EQ(r,
            "HTTP/1.1 502 Bad Gateway\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            "Content-Length: 33\r\n"
            "Sluice-Error: connect refused\r\n"
            "X-Request-Id: abc\r\n"
            "Connection: close\r\n"
            "\r\n"
            "502 Bad Gateway: connect refused\n");
}

TEST(ErrorResponse, KeepAliveAndNoRequestId) {
  const auto r = format({404, "no route"}, "", true);
  EXPECT_EQ(r.find("Connection"), std::string::npos);
  EXPECT_EQ(r.find("X-Request-Id"), std::string::npos);
  EXPECT_NE(r.find("HTTP/1.1 404 Not Found\r\n"), std::string::npos);
}

// The access log's bytes_out of sluice's own answers: the body the client took, not the head;
// all of it once all was written, part of it for a client that left mid-answer, none before the
// head was out. A page written after the head counts as body too.
TEST(ErrorResponse, BodyBytesSentAreWhatWasWrittenAfterTheHead) {
  const auto r = format({502, "connect refused"}, "id-1", false);
  const auto head = r.find("\r\n\r\n") + 4;
  const auto body = r.size() - head;
  EXPECT_NE(r.find("Content-Length: " + std::to_string(body) + "\r\n"), std::string::npos);
  EXPECT_EQ(body_bytes_sent(r, r.size()), body);
  EXPECT_EQ(body_bytes_sent(r, head + 3), 3u);
  EXPECT_EQ(body_bytes_sent(r, head), 0u);
  EXPECT_EQ(body_bytes_sent(r, 10), 0u);
  EXPECT_EQ(body_bytes_sent(r, 0), 0u);
  const auto page_head = r.substr(0, head);  // a head whose page follows it, 1,000 bytes
  EXPECT_EQ(body_bytes_sent(page_head, head + 1000), 1000u);
  EXPECT_EQ(body_bytes_sent("HTTP/1.1 400 Bad Request\r\n", 100), 0u);
}

}  // namespace
}  // namespace sluice::proxy

namespace sluice::proxy {
namespace {

// error_detail = "status": the status line's words alone, no Sluice-Error, no upstream name.
TEST(ErrorResponse, StatusOnlyShowsNoInternals) {
  char buf[1024];
  ErrorStyle style;
  style.detail = false;
  style.date = "Sun, 06 Nov 1994 08:49:37 GMT";
  const std::string r(buf, format_error(buf, {503, "no healthy server", "app", "not idempotent"}, "id-1",
                                        false, style));
  EXPECT_EQ(r,
            "HTTP/1.1 503 Service Unavailable\r\n"
            "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            "Content-Length: 24\r\n"
            "X-Request-Id: id-1\r\n"
            "Connection: close\r\n"
            "\r\n"
            "503 Service Unavailable\n");
}

TEST(ErrorResponse, FullDetailNamesTheReasonAndTheUpstream) {
  char buf[1024];
  const std::string r(buf, format_error(buf, {503, "no healthy server", "app"}, "", true));
  EXPECT_NE(r.find("Sluice-Error: no healthy server\r\n"), std::string::npos) << r;
  EXPECT_TRUE(r.ends_with("\r\n\r\n503 Service Unavailable: no healthy server in upstream app\n")) << r;
}

// A page: the head with its type and length; the body is the caller's to send after it.
TEST(ErrorResponse, PageHeadCarriesItsTypeAndLength) {
  char buf[1024];
  ErrorStyle style;
  style.detail = false;
  style.page = "<h1>down</h1>";
  style.page_type = "text/html; charset=utf-8";
  const std::string r(buf, format_error(buf, {502, "connect refused"}, "", true, style));
  EXPECT_EQ(r,
            "HTTP/1.1 502 Bad Gateway\r\n"
            "Content-Type: text/html; charset=utf-8\r\n"
            "Content-Length: 13\r\n"
            "\r\n");
}

}  // namespace
}  // namespace sluice::proxy
