// What `check` must refuse because `run` or a reload would: names that do not resolve, and keys
// that each look fine but contradict another (docs/configuration.md, "Rules between keys").
#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

#include "load_helpers.hpp"

namespace sluice::config {
namespace {

using testing::Errors;
using testing::errors_of;
using testing::load;

std::string upstream(std::string_view keys, std::string_view retry) {
  return "[upstreams.app]\n" + std::string(keys) + "\n[[upstreams.app.servers]]\naddress = " +
         "\"127.0.0.1:9001\"\n[upstreams.app.retry]\n" + std::string(retry) + "\n";
}

TEST(ConfigAddresses, AHostThatDoesNotResolveIsAnErrorAtItsKey) {
  const auto result = load("[upstreams.app]\n[[upstreams.app.servers]]\naddress = \"no-such-host.invalid:80\"\n");
  ASSERT_EQ(errors_of(result).size(), 1u);
  EXPECT_TRUE(errors_of(result)[0].starts_with(
      "test.toml:3:11: upstreams.app.servers[0].address: cannot resolve 'no-such-host.invalid': "))
      << errors_of(result)[0];
  EXPECT_EQ(errors_of(load("[server]\nlisten = \"999.1.1.1:80\"\n" + std::string(testing::one_upstream))),
            (Errors{"test.toml:2:10: server.listen: '999.1.1.1' is not a valid IPv4 address"}));
  EXPECT_TRUE(load("[server]\nlisten = \"localhost:0\"\n" + std::string(testing::one_upstream)).ok());
}

TEST(ConfigRetryRules, BackoffMustNotExceedBackoffMax) {
  EXPECT_EQ(errors_of(load(upstream("", "backoff = \"1s\"\nbackoff_max = \"10ms\""))),
            (Errors{"test.toml:6:11: upstreams.app.retry.backoff: must not exceed backoff_max (10ms), got 1s"}));
}

TEST(ConfigRetryRules, PerTryTimeoutMustNotExceedResponseTimeout) {
  EXPECT_EQ(errors_of(load(upstream("response_timeout = \"1s\"", "per_try_timeout = \"2s\""))),
            (Errors{"test.toml:6:19: upstreams.app.retry.per_try_timeout: must not exceed "
                    "response_timeout (1s), got 2s"}));
}

TEST(ConfigRetryRules, DeadlineMustHoldOneTry) {
  EXPECT_EQ(errors_of(load(upstream("", "per_try_timeout = \"1s\"\ndeadline = \"500ms\""))),
            (Errors{"test.toml:7:12: upstreams.app.retry.deadline: must be at least one try's "
                    "timeout (per_try_timeout 1s), got 500ms"}));
  // Without per_try_timeout the deadline simply caps the request below response_timeout.
  EXPECT_TRUE(load(upstream("response_timeout = \"2s\"", "deadline = \"1s\"")).ok());
  EXPECT_TRUE(load(upstream("", "per_try_timeout = \"1s\"\ndeadline = \"3s\"")).ok());
}

TEST(ConfigRetryRules, IdempotencyHeaderMustBeAHeaderName) {
  EXPECT_EQ(errors_of(load(upstream("", "idempotency_header = \"bad header\""))),
            (Errors{"test.toml:6:22: upstreams.app.retry.idempotency_header: 'bad header' is not a "
                    "header name (letters, digits and !#$%&'*+-.^_`|~)"}));
  EXPECT_TRUE(load(upstream("", "idempotency_header = \"X-Request-Key\"")).ok());
  EXPECT_TRUE(load(upstream("", "idempotency_header = \"\"")).ok());
}

// One grammar for retry.on and passive.fail_on: words, statuses, ranges and classes in both, and
// every bad item reported at its index.
TEST(ConfigFailureItems, RetryOnAndFailOnTakeTheSameItems) {
  const auto ok = load(upstream("", "on = [\"refused\", \"5xx\", \"429\"]") +
                       "[upstreams.app.passive]\nfail_on = [\"refused\", \"500-504\"]\n");
  ASSERT_TRUE(ok.ok()) << ::testing::PrintToString(errors_of(ok));
  const auto& r = ok.config->upstreams[0].retry;
  EXPECT_TRUE(r.on_refused);
  EXPECT_FALSE(r.on_connect);
  EXPECT_EQ(r.on_status.size(), 101u);  // 500..599 and 429
  EXPECT_EQ(errors_of(load(upstream("", "on = [\"sometimes\", \"reset\", \"6xx\"]"))),
            (Errors{"test.toml:6:7: upstreams.app.retry.on[0]: unknown failure 'sometimes'; expected "
                    "connect, refused, reset, timeout, or a status, range or class (\"503\", "
                    "\"500-504\", \"5xx\")",
                    "test.toml:6:29: upstreams.app.retry.on[2]: bad status class '6xx' (use 1xx-5xx)"}));
}

// retry.on's gRPC codes: by name in any case, OK refused, and written back as they are read;
// passive.fail_on takes none.
TEST(ConfigFailureItems, RetryOnTakesGrpcCodesByName) {
  const auto ok = load(upstream("", "on = [\"connect\", \"grpc:unavailable\", \"grpc:RESOURCE_EXHAUSTED\"]"));
  ASSERT_TRUE(ok.ok()) << ::testing::PrintToString(errors_of(ok));
  const auto& r = ok.config->upstreams[0].retry;
  EXPECT_EQ(r.on_grpc, (1u << 14) | (1u << 8));
  EXPECT_TRUE(r.on_status.empty());
  EXPECT_EQ(config::RetryConfig{}.on_grpc, 0u);  // none by default
  EXPECT_EQ(errors_of(load(upstream("", "on = [\"grpc:ok\", \"grpc:busy\"]"))),
            (Errors{"test.toml:6:7: upstreams.app.retry.on[0]: unknown gRPC code 'ok' (OK is no failure); expected "
                    "grpc: and one of cancelled, unknown, invalid_argument, deadline_exceeded, not_found, "
                    "already_exists, permission_denied, resource_exhausted, failed_precondition, aborted, "
                    "out_of_range, unimplemented, internal, unavailable, data_loss, unauthenticated",
                    "test.toml:6:18: upstreams.app.retry.on[1]: unknown gRPC code 'busy' (OK is no failure); expected "
                    "grpc: and one of cancelled, unknown, invalid_argument, deadline_exceeded, not_found, "
                    "already_exists, permission_denied, resource_exhausted, failed_precondition, aborted, "
                    "out_of_range, unimplemented, internal, unavailable, data_loss, unauthenticated"}));
  EXPECT_FALSE(load("[upstreams.app.passive]\nfail_on = [\"grpc:unavailable\"]\n" + upstream("", "")).ok());
}

}  // namespace
}  // namespace sluice::config
