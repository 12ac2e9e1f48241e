#include "sluice/config/fail_on.hpp"

#include "sluice/config/config.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::health {
namespace {

TEST(HealthFailOn, DefaultsCountConnectTimeoutResetAndGatewayErrors) {
  const auto f = config::PassiveConfig{}.fail_on;
  EXPECT_TRUE(f.counts(Failure::of(FailureKind::connect_error)));
  EXPECT_TRUE(f.counts(Failure::of(FailureKind::response_timeout)));
  EXPECT_TRUE(f.counts(Failure::of(FailureKind::reset_after_send)));
  EXPECT_TRUE(f.counts(Failure::answered(502)));
  EXPECT_TRUE(f.counts(Failure::answered(503)));
  EXPECT_TRUE(f.counts(Failure::answered(504)));
  EXPECT_FALSE(f.counts(Failure::answered(500)));
  EXPECT_FALSE(f.counts(Failure::answered(200)));
  EXPECT_FALSE(f.counts(Failure::answered(404)));
  EXPECT_EQ(f.to_string(), "connect,timeout,reset,502-504");
}

TEST(HealthFailOn, StatusClassesAndRanges) {
  const std::vector<std::string> items{"5xx", "429"};
  const auto f = FailOn::parse(items);
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->counts(Failure::answered(500)));
  EXPECT_TRUE(f->counts(Failure::answered(429)));
  EXPECT_FALSE(f->counts(Failure::answered(404)));
  EXPECT_FALSE(f->counts(Failure::of(FailureKind::connect_error)));
  EXPECT_EQ(f->to_string(), "429,500-599");
}

TEST(HealthFailOn, EmptyListCountsNothing) {
  const auto f = FailOn::parse({});
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->counts(Failure::of(FailureKind::connect_error)));
  EXPECT_FALSE(f->counts(Failure::answered(503)));
}

TEST(HealthFailOn, UnknownItemIsRejected) {
  const std::vector<std::string> items{"connect", "conect"};
  std::string error;
  EXPECT_FALSE(FailOn::parse(items, &error));
  EXPECT_EQ(error,
            "unknown failure 'conect'; expected connect, refused, reset, timeout, or a status, "
            "range or class (\"503\", \"500-504\", \"5xx\")");
}

// retry.on and fail_on share one grammar: "refused" counts refused connects only.
TEST(HealthFailOn, RefusedCountsOnlyRefusedConnects) {
  const std::vector<std::string> items{"refused", "5xx"};
  const auto f = FailOn::parse(items);
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->counts(Failure::of(FailureKind::connect_refused)));
  EXPECT_FALSE(f->counts(Failure::of(FailureKind::connect_timeout)));
  EXPECT_TRUE(f->counts(Failure::answered(500)));
  EXPECT_EQ(f->to_string(), "refused,500-599");
}

// The words health reasons give a live failure ("failure 1 of 3 in 10s: connect refused").
TEST(HealthFailOn, DescribeLive) {
  EXPECT_EQ(describe_live(Failure::answered(502)), "502");
  EXPECT_EQ(describe_live(Failure::of(FailureKind::connect_error)), "connect failed");
  EXPECT_EQ(describe_live(Failure::of(FailureKind::connect_refused)), "connect refused");
  EXPECT_EQ(describe_live(Failure::of(FailureKind::response_timeout)), "response timeout");
  EXPECT_EQ(describe_live(Failure::of(FailureKind::send_timeout)), "send timeout");
  EXPECT_EQ(describe_live(Failure::of(FailureKind::reset_after_send)), "connection reset");
  EXPECT_EQ(describe_live(Failure::of(FailureKind::bad_response)), "bad response");
}

}  // namespace
}  // namespace sluice::health
