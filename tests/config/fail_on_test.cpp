#include "sluice/config/fail_on.hpp"

#include "sluice/config/config.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::health {
namespace {

TEST(HealthFailOn, DefaultsCountConnectTimeoutResetAndGatewayErrors) {
  const auto f = config::PassiveConfig{}.fail_on;
  EXPECT_TRUE(f.counts(LiveResult::connect_failure()));
  EXPECT_TRUE(f.counts(LiveResult::timeout()));
  EXPECT_TRUE(f.counts(LiveResult::reset()));
  EXPECT_TRUE(f.counts(LiveResult::response(502)));
  EXPECT_TRUE(f.counts(LiveResult::response(503)));
  EXPECT_TRUE(f.counts(LiveResult::response(504)));
  EXPECT_FALSE(f.counts(LiveResult::response(500)));
  EXPECT_FALSE(f.counts(LiveResult::response(200)));
  EXPECT_FALSE(f.counts(LiveResult::response(404)));
  EXPECT_EQ(f.to_string(), "connect,timeout,reset,502-504");
}

TEST(HealthFailOn, StatusClassesAndRanges) {
  const std::vector<std::string> items{"5xx", "429"};
  const auto f = FailOn::parse(items);
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->counts(LiveResult::response(500)));
  EXPECT_TRUE(f->counts(LiveResult::response(429)));
  EXPECT_FALSE(f->counts(LiveResult::response(404)));
  EXPECT_FALSE(f->counts(LiveResult::connect_failure()));
  EXPECT_EQ(f->to_string(), "429,500-599");
}

TEST(HealthFailOn, EmptyListCountsNothing) {
  const auto f = FailOn::parse({});
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->counts(LiveResult::connect_failure()));
  EXPECT_FALSE(f->counts(LiveResult::response(503)));
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
  EXPECT_TRUE(f->counts(LiveResult::connect_failure("connect refused")));
  EXPECT_FALSE(f->counts(LiveResult::connect_failure("connect timeout")));
  EXPECT_TRUE(f->counts(LiveResult::response(500)));
  EXPECT_EQ(f->to_string(), "refused,500-599");
}

TEST(HealthFailOn, Describe) {
  EXPECT_EQ(describe(LiveResult::response(502)), "502");
  EXPECT_EQ(describe(LiveResult::connect_failure()), "connect");
  EXPECT_EQ(describe(LiveResult::connect_failure("connect refused")), "connect refused");
  EXPECT_EQ(describe(LiveResult::timeout()), "timeout");
  EXPECT_EQ(describe(LiveResult::reset()), "reset");
}

}  // namespace
}  // namespace sluice::health
