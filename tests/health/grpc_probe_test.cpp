#include "sluice/health/grpc_probe.hpp"

#include <gtest/gtest.h>

namespace sluice::health {
namespace {

using namespace std::string_literals;

// A gRPC message (uncompressed) around `protobuf`.
std::string message(const std::string& protobuf) {
  const auto n = protobuf.size();
  return "\0\0\0\0"s + static_cast<char>(n) + protobuf;
}

GrpcAnswer answer(std::string body, std::string grpc_status = "0") {
  GrpcAnswer a;
  a.status = 200;
  a.grpc_status = std::move(grpc_status);
  a.body = std::move(body);
  a.complete = true;
  return a;
}

TEST(GrpcHealthProbe, RequestIsOneMessageWithTheServiceAsField1) {
  EXPECT_EQ(grpc_health_request(""), "\0\0\0\0\0"s);  // an empty HealthCheckRequest
  EXPECT_EQ(grpc_health_request("app.v1.Orders"), "\0\0\0\0\x0f\x0a\x0d"s + "app.v1.Orders");
  const std::string long_name(200, 'x');  // a length of two varint bytes: 0xc8 0x01
  EXPECT_EQ(grpc_health_request(long_name), "\0\0\0\0\xcb\x0a\xc8\x01"s + long_name);
}

TEST(GrpcHealthProbe, ServingPassesAndEveryOtherStatusSaysWhich) {
  EXPECT_TRUE(judge_grpc_health(answer(message("\x08\x01"))).passed);
  EXPECT_EQ(judge_grpc_health(answer(message("\x08\x02"))).detail, "health status NOT_SERVING");
  EXPECT_EQ(judge_grpc_health(answer(message("\x08\x03"))).detail, "health status SERVICE_UNKNOWN");
  EXPECT_EQ(judge_grpc_health(answer(message(""))).detail, "health status UNKNOWN");  // proto3's default
  EXPECT_EQ(judge_grpc_health(answer(message("\x08\x09"))).detail, "health status 9");
  // Fields it does not know are skipped, before and after.
  EXPECT_TRUE(judge_grpc_health(answer(message("\x12\x02hi\x08\x01\x1d\x01\x02\x03\x04"))).passed);
}

TEST(GrpcHealthProbe, AnErrorStatusOrABrokenAnswerFailsWithWhatCame) {
  auto a = answer("", "12");
  a.grpc_message = "unknown service grpc.health.v1.Health";
  EXPECT_EQ(judge_grpc_health(a).detail, "grpc-status 12 (UNIMPLEMENTED): unknown service grpc.health.v1.Health");
  a.status = 503;
  EXPECT_EQ(judge_grpc_health(a).detail, "status 503 not 200 (gRPC)");
  EXPECT_EQ(judge_grpc_health(answer(message("\x08\x01"), "")).detail, "no grpc-status in the answer");
  EXPECT_EQ(judge_grpc_health(answer("\x01\0\0\0\x02\x08\x01"s)).detail, "bad health response");  // compressed
  EXPECT_EQ(judge_grpc_health(answer("\0\0\0\0\x05\x08\x01"s)).detail, "bad health response");    // cut
  EXPECT_EQ(judge_grpc_health(answer(message("\x08"))).detail, "bad health response");            // cut varint
  GrpcAnswer reset;
  EXPECT_EQ(judge_grpc_health(reset).detail, "stream reset before an answer");
}

}  // namespace
}  // namespace sluice::health
