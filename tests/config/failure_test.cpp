#include "sluice/config/failure.hpp"

#include <gtest/gtest.h>

#include <iterator>
#include <string>
#include <vector>

namespace sluice::health {
namespace {

using K = FailureKind;

Failure on_pooled(K kind, bool received) {
  auto f = Failure::of(kind);
  f.reused_connection = true;
  f.request_bytes_sent = true;
  f.response_bytes_received = received;
  return f;
}

TEST(Failure, AnAnswerIsNoFailureAndCarriesItsStatus) {
  const auto f = Failure::answered(503);
  EXPECT_FALSE(f.failed());
  EXPECT_TRUE(f.request_bytes_sent);
  EXPECT_EQ(f.status, 503u);
  EXPECT_EQ(f.source, FailureSource::upstream);
}

TEST(Failure, TheClientsFailureIsBlamedOnTheClient) {
  EXPECT_EQ(Failure::of(K::client_failed).source, FailureSource::client);
  EXPECT_EQ(Failure::of(K::reset_after_send).source, FailureSource::upstream);
  for (std::size_t k = 1; k < failure_kind_count; ++k) {
    const auto kind = static_cast<K>(k);
    if (kind != K::client_failed) EXPECT_EQ(Failure::of(kind).source, FailureSource::upstream) << describe(kind);
  }
}

// The pooled connection the origin closed while idle: it broke on a reset before any byte of an
// answer. A timeout or a broken answer on a pooled connection is the server's.
TEST(Failure, StaleConnectionIsAResetBeforeAnyAnswerOnAPooledConnection) {
  EXPECT_TRUE(stale_connection(on_pooled(K::reset_before_send, false)));
  EXPECT_TRUE(stale_connection(on_pooled(K::reset_after_send, false)));
  EXPECT_FALSE(stale_connection(on_pooled(K::reset_after_send, true)));
  EXPECT_FALSE(stale_connection(on_pooled(K::response_timeout, false)));
  EXPECT_FALSE(stale_connection(on_pooled(K::send_timeout, false)));
  EXPECT_FALSE(stale_connection(on_pooled(K::bad_response, false)));
  EXPECT_FALSE(stale_connection(Failure::of(K::reset_after_send)));  // a new connection
}

TEST(Failure, LiveResultOfEachKind) {
  using R = LiveResult::Kind;
  struct Case {
    K kind;
    R result;
    unsigned status;
  };
  const Case cases[] = {
      {K::connect_refused, R::connect, 0},    {K::connect_timeout, R::timeout, 0},
      {K::connect_error, R::connect, 0},      {K::reset_before_send, R::reset, 0},
      {K::reset_after_send, R::reset, 0},     {K::response_timeout, R::timeout, 0},
      {K::send_timeout, R::timeout, 0},       {K::bad_response, R::response, 502},
      {K::tls_failed, R::reset, 0},
  };
  // Every kind but none and client_failed (no word on the server): a new kind must be added here.
  static_assert(std::size(cases) == failure_kind_count - 2);
  for (const auto& c : cases) {
    const auto r = live_result(Failure::of(c.kind));
    ASSERT_TRUE(r) << describe(c.kind);
    EXPECT_EQ(r->kind, c.result) << describe(c.kind);
    EXPECT_EQ(r->status, c.status) << describe(c.kind);
  }
  EXPECT_EQ(live_result(Failure::of(K::connect_refused))->detail, "connect refused");
  const auto answered = live_result(Failure::answered(504));
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->kind, R::response);
  EXPECT_EQ(answered->status, 504u);
}

// docs/configuration.md: `fail_on = ["connect"]` counts every connect failure, as
// `retry.on = ["connect"]` retries every one (proxy/retry.cpp); a connect timeout is also a
// timeout, as for retry.on.
TEST(Failure, FailOnConnectCountsEveryConnectFailureTheTryMet) {
  const auto counts = [](std::vector<std::string> items, K kind) {
    const auto f = FailOn::parse(items);
    const auto r = live_result(Failure::of(kind));
    return f && r && f->counts(*r);
  };
  for (const K kind : {K::connect_refused, K::connect_timeout, K::connect_error}) {
    EXPECT_TRUE(counts({"connect"}, kind)) << describe(kind);
    EXPECT_FALSE(counts({"reset", "5xx"}, kind)) << describe(kind);
  }
  EXPECT_TRUE(counts({"timeout"}, K::connect_timeout));
  EXPECT_TRUE(counts({"refused"}, K::connect_refused));
  EXPECT_FALSE(counts({"refused"}, K::connect_timeout));
  EXPECT_FALSE(counts({"refused"}, K::connect_error));
  EXPECT_FALSE(counts({"connect"}, K::response_timeout));
  EXPECT_FALSE(counts({"connect"}, K::send_timeout));
}

TEST(Failure, NothingIsSaidOfTheServerForFailuresThatAreNotItsOwn) {
  EXPECT_FALSE(live_result(Failure::of(K::client_failed)));
  EXPECT_FALSE(live_result(on_pooled(K::reset_before_send, false)));
  auto internal = Failure::of(K::tls_failed, "upstream tls handshake failed: not configured");
  internal.source = FailureSource::internal;
  EXPECT_FALSE(live_result(internal));
}

TEST(Failure, EveryKindHasWordsAndTheCountCoversThemAll) {
  EXPECT_EQ(describe(K::none), "");
  for (std::size_t k = 1; k < failure_kind_count; ++k)
    EXPECT_FALSE(describe(static_cast<K>(k)).empty()) << k;
  EXPECT_EQ(describe(static_cast<K>(failure_kind_count)), "upstream error");
}

}  // namespace
}  // namespace sluice::health
