#include "sluice/proxy/failure.hpp"

#include <gtest/gtest.h>

namespace sluice::proxy {
namespace {

using K = FailureKind;

TEST(FailureAnswer, TimeoutsAre504AndTheRest502) {
  for (std::size_t k = 1; k < failure_kind_count; ++k) {
    const auto kind = static_cast<K>(k);
    const bool late = kind == K::response_timeout || kind == K::send_timeout;
    EXPECT_EQ(status_of(Failure::of(kind)), late ? 504u : 502u) << health::describe(kind);
  }
}

TEST(FailureAnswer, SluiceErrorIsTheDetailElseTheKindsWords) {
  EXPECT_EQ(sluice_error(Failure::of(K::connect_refused)), "connect refused");
  EXPECT_EQ(sluice_error(Failure::of(K::reset_before_send)), "upstream reset before request sent");
  EXPECT_EQ(sluice_error(Failure::of(K::tls_failed)), "upstream tls handshake failed");
  EXPECT_EQ(sluice_error(Failure::of(K::tls_failed, "upstream certificate verify failed: expired")),
            "upstream certificate verify failed: expired");
}

TEST(FailureAnswer, ErrorCarriesStatusReasonAndWhyNotRetried) {
  const auto e = error_for(Failure::of(K::response_timeout), "retry budget exhausted");
  EXPECT_EQ(e.status, 504u);
  EXPECT_EQ(e.reason, "response timeout");
  EXPECT_EQ(e.not_retried, "retry budget exhausted");
  EXPECT_TRUE(error_for(Failure::of(K::bad_response)).not_retried.empty());
}

}  // namespace
}  // namespace sluice::proxy
