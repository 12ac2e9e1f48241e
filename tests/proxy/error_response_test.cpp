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

// The access log's bytes_out of sluice's own answers: the body, not the head.
TEST(ErrorResponse, BodySizeIsWhatFollowsTheHead) {
  const auto r = format({502, "connect refused"}, "id-1", false);
  const auto body = r.substr(r.find("\r\n\r\n") + 4);
  EXPECT_EQ(error_body_size(r), body.size());
  EXPECT_NE(r.find("Content-Length: " + std::to_string(body.size()) + "\r\n"), std::string::npos);
  EXPECT_EQ(error_body_size("HTTP/1.1 400 Bad Request\r\n"), 0u);
}

}  // namespace
}  // namespace sluice::proxy
