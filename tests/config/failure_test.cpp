#include "sluice/config/failure.hpp"
#include "sluice/config/fail_on.hpp"

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

// The one mapping from kinds to the words of `fail_on` and `retry.on`: which single word names
// each kind (a kind may be named by two: a refused connect by `connect` and `refused`).
TEST(Failure, EachKindIsNamedByItsWords) {
  struct Case {
    K kind;
    bool connect, refused, timeout, reset;
  };
  const Case cases[] = {
      {K::connect_refused, true, true, false, false},   {K::connect_timeout, true, false, true, false},
      {K::connect_error, true, false, false, false},    {K::tls_failed, true, false, false, false},
      {K::reset_before_send, false, false, false, true}, {K::reset_after_send, false, false, false, true},
      {K::bad_response, false, false, false, true},     {K::response_timeout, false, false, true, false},
      {K::send_timeout, false, false, true, false},     {K::client_failed, false, false, false, false},
  };
  // Every kind but none (an answer: its status is what a list names): a new kind must be here.
  static_assert(std::size(cases) == failure_kind_count - 1);
  for (const auto& c : cases) {
    EXPECT_EQ(names({.connect = true}, c.kind), c.connect) << describe(c.kind);
    EXPECT_EQ(names({.refused = true}, c.kind), c.refused) << describe(c.kind);
    EXPECT_EQ(names({.timeout = true}, c.kind), c.timeout) << describe(c.kind);
    EXPECT_EQ(names({.reset = true}, c.kind), c.reset) << describe(c.kind);
  }
  EXPECT_FALSE(names({true, true, true, true}, K::none));
}

// docs/configuration.md: `fail_on = ["connect"]` counts every connect failure, as
// `retry.on = ["connect"]` retries every one (proxy/retry.cpp); a connect timeout is also a
// timeout, as for retry.on.
TEST(Failure, FailOnConnectCountsEveryConnectFailureTheTryMet) {
  const auto counts = [](std::vector<std::string> items, K kind) {
    const auto f = FailOn::parse(items);
    return f && f->counts(Failure::of(kind));
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
  EXPECT_FALSE(tells_of_server(Failure::of(K::client_failed)));
  EXPECT_FALSE(tells_of_server(on_pooled(K::reset_before_send, false)));
  auto internal = Failure::of(K::tls_failed, "upstream tls handshake failed: not configured");
  internal.source = FailureSource::internal;
  EXPECT_FALSE(tells_of_server(internal));
  EXPECT_TRUE(tells_of_server(Failure::of(K::tls_failed)));
  EXPECT_TRUE(tells_of_server(Failure::answered(503)));
}

TEST(Failure, EveryKindHasWordsAndTheCountCoversThemAll) {
  EXPECT_EQ(describe(K::none), "");
  for (std::size_t k = 1; k < failure_kind_count; ++k)
    EXPECT_FALSE(describe(static_cast<K>(k)).empty()) << k;
  EXPECT_EQ(describe(static_cast<K>(failure_kind_count)), "upstream error");
}

}  // namespace
}  // namespace sluice::health
