#include "sluice/telemetry/access_log.hpp"
#include "sluice/telemetry/log_sink.hpp"

#include <chrono>
#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace {

std::string escaped(std::string_view s) {
  std::string out;
  sluice::append_text_escaped(out, s);
  return out;
}

// A target like /a"b must not end the quoted request field of the text access log early.
TEST(AccessLogText, QuotesBackslashesAndControlBytesAreEscaped) {
  EXPECT_EQ(escaped("/a\"b"), "/a\\\"b");
  EXPECT_EQ(escaped("/a\\b"), "/a\\\\b");
  EXPECT_EQ(escaped(std::string_view("a\nb\x01\x7f", 5)), "a\\x0ab\\x01\\x7f");
  EXPECT_EQ(escaped("/plain?x=1&y=%20"), "/plain?x=1&y=%20");
}

}  // namespace

namespace sluice {
namespace {

using std::chrono::microseconds;

AccessRecord full_record() {
  AccessRecord r;
  r.client = "192.0.2.7";
  r.method = "GET";
  r.target = "/a\"b";
  r.status = 200;
  r.upstream = "app";
  r.server = "app-1,app-2";
  r.attempts = 2;
  r.bytes_in = 5;
  r.bytes_out = 1234;
  r.duration = microseconds(13301);
  r.request_id = "id-1";
  r.retry = "budget";
  r.protocol = "HTTP/1.1";
  r.host = "shop.test";
  r.user_agent = "ua \"x\"\n";
  r.route = "*/api/";
  r.upstream_connect = microseconds(412);
  r.upstream_first_byte = microseconds(12877);
  return r;
}

// An answer sluice gave before any request line was parsed: most fields are absent.
AccessRecord bare_record(unsigned status, std::string_view error) {
  AccessRecord r;
  r.client = "::1";
  r.method = "-";
  r.target = "-";
  r.status = status;
  r.error = error;
  return r;
}

std::string formatted(const AccessRecord& r, config::AccessLogFormat format) {
  spdlog::memory_buf_t out;
  format_access_record(out, r, format);
  return std::string(out.data(), out.size());
}

TEST(AccessLogJson, CarriesEveryFieldWithMillisecondTimes) {
  const auto line = formatted(full_record(), config::AccessLogFormat::json);
  // The time is "now": checked by shape, the rest exactly.
  ASSERT_EQ(line.rfind("{\"time\":\"", 0), 0u) << line;
  const auto rest = line.substr(line.find("\",\"client\""));
  EXPECT_EQ(line.substr(9, 24).size(), 24u);
  EXPECT_EQ(line[32], 'Z') << line;
  EXPECT_EQ(line[28], '.') << line;
  EXPECT_EQ(rest,
            "\",\"client\":\"192.0.2.7\",\"method\":\"GET\",\"target\":\"/a\\\"b\","
            "\"protocol\":\"HTTP/1.1\",\"host\":\"shop.test\",\"user_agent\":\"ua \\\"x\\\"\\u000a\","
            "\"status\":200,\"route\":\"*/api/\",\"upstream\":\"app\",\"server\":\"app-1,app-2\","
            "\"attempts\":2,\"upstream_connect_ms\":0.412,\"upstream_first_byte_ms\":12.877,"
            "\"bytes_in\":5,\"bytes_out\":1234,\"duration_ms\":13.301,\"request_id\":\"id-1\","
            "\"error\":null,\"retry\":\"budget\",\"idempotency\":null,\"client_cert_verify\":null,"
            "\"client_cert_subject\":null,\"grpc_status\":null}");
}

// A held record owns its text: it formats exactly as the record it was made from after that
// record's strings are gone and the held one was moved (its text fits a short string's own buffer
// here, which a move copies to a new place: no view into the old one may be kept).
TEST(HeldAccessRecord, FormatsAsItsRecordAfterTheTextItCameFromIsGone) {
  const auto expected = formatted(full_record(), config::AccessLogFormat::json);
  std::optional<HeldAccessRecord> held;
  {
    auto r = full_record();
    std::string client(r.client), target(r.target);
    r.client = client;
    r.target = target;
    held.emplace(r);
    client.assign(client.size(), 'x');
    target.assign(target.size(), 'x');
  }
  const HeldAccessRecord moved = std::move(*held);
  held.reset();
  const auto line = formatted(moved.record(), config::AccessLogFormat::json);
  EXPECT_EQ(line.substr(line.find("\",\"client\"")), expected.substr(expected.find("\",\"client\"")));

  const HeldAccessRecord small(bare_record(400, "bad"));
  const HeldAccessRecord small_moved = small;
  EXPECT_EQ(small_moved.record().error, "bad");
  EXPECT_EQ(small_moved.record().status, 400u);
}

TEST(AccessLogJson, AbsentValuesAreNull) {
  const auto line = formatted(bare_record(400, "bad request line"), config::AccessLogFormat::json);
  for (const auto* field : {"\"protocol\":null", "\"host\":null", "\"user_agent\":null",
                            "\"route\":null", "\"upstream_connect_ms\":null",
                            "\"upstream_first_byte_ms\":null", "\"retry\":null",
                            "\"error\":\"bad request line\"", "\"upstream\":\"\""})
    EXPECT_NE(line.find(field), std::string::npos) << field << " in " << line;
}

TEST(AccessLogText, KeepsTheOldFieldsFirstAndAddsTheNewOnes) {
  EXPECT_EQ(formatted(full_record(), config::AccessLogFormat::text),
            "192.0.2.7 \"GET /a\\\"b\" 200 upstream=app server=app-1,app-2 attempts=2 in=5 "
            "out=1234 13.301ms id=id-1 proto=HTTP/1.1 host=\"shop.test\" ua=\"ua \\\"x\\\"\\x0a\" "
            "route=*/api/ connect=0.412ms first_byte=12.877ms retry=budget");
  EXPECT_EQ(formatted(bare_record(404, "no route"), config::AccessLogFormat::text),
            "::1 \"- -\" 404 upstream=- server=- attempts=0 in=0 out=0 0.000ms id= proto=- "
            "host=\"-\" ua=\"-\" route=- connect=- first_byte=- error=\"no route\"");
}

// On a listener with verify_client on, the client certificate's verification and subject.
TEST(AccessLog, ClientCertificateFieldsInBothFormatsAndHeldRecords) {
  auto r = full_record();
  r.retry = {};
  std::string verify = "FAILED:certificate has expired", subject = "CN=bob,O=Ex \"q\"";
  r.client_cert_verify = verify;
  r.client_cert_subject = subject;
  const auto text = formatted(r, config::AccessLogFormat::text);
  const HeldAccessRecord held(r);
  // The held record has its own copy of the text.
  verify.assign(verify.size(), 'x');
  subject.assign(subject.size(), 'x');
  const auto json = formatted(held.record(), config::AccessLogFormat::json);
  EXPECT_TRUE(json.ends_with("\"client_cert_verify\":\"FAILED:certificate has expired\","
                             "\"client_cert_subject\":\"CN=bob,O=Ex \\\"q\\\"\",\"grpc_status\":null}"))
      << json;
  EXPECT_TRUE(text.ends_with(" first_byte=12.877ms client_cert=\"FAILED:certificate has expired\" "
                             "client_subject=\"CN=bob,O=Ex \\\"q\\\"\""))
      << text;
}

TEST(AccessLog, GrpcStatusOnlyOnGrpcCallsInBothFormatsAndHeldRecords) {
  auto r = full_record();
  r.retry = {};
  std::string status = "14";
  r.grpc_status = status;
  const auto text = formatted(r, config::AccessLogFormat::text);
  const HeldAccessRecord held(r);
  status.assign(status.size(), 'x');
  const auto json = formatted(held.record(), config::AccessLogFormat::json);
  EXPECT_TRUE(json.ends_with("\"client_cert_subject\":null,\"grpc_status\":\"14\"}")) << json;
  EXPECT_TRUE(text.ends_with(" first_byte=12.877ms grpc=14")) << text;
  r.grpc_status = {};
  EXPECT_TRUE(formatted(r, config::AccessLogFormat::text).ends_with(" first_byte=12.877ms"));
}

TEST(AccessLogTime, Rfc3339InUtcWithMilliseconds) {
  spdlog::memory_buf_t out;
  // 2026-12-01T14:30:05.007Z
  const auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(1796135405007));
  append_rfc3339_ms(out, t);
  EXPECT_EQ(std::string(out.data(), out.size()), "2026-12-01T14:30:05.007Z");
  out.clear();
  append_rfc3339_ms(out, t + std::chrono::milliseconds(1993));  // the next second, cache renewed
  EXPECT_EQ(std::string(out.data(), out.size()), "2026-12-01T14:30:07.000Z");
}

TEST(ErrorLogJson, OneObjectPerLine) {
  spdlog::details::log_msg msg("sluice", spdlog::level::warn, "server \"a\"\tdown");
  msg.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1796135405123));
  spdlog::memory_buf_t out;
  JsonLogFormatter().format(msg, out);
  EXPECT_EQ(std::string(out.data(), out.size()),
            "{\"time\":\"2026-12-01T14:30:05.123Z\",\"level\":\"warn\","
            "\"message\":\"server \\\"a\\\"\\u0009down\"}\n");
}

}  // namespace
}  // namespace sluice
