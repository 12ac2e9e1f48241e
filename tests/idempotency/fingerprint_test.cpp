#include "sluice/idempotency/fingerprint.hpp"

#include <gtest/gtest.h>

#include "sluice/idempotency/record.hpp"

namespace sluice::idempotency {
namespace {

TEST(Fingerprint, SameRequestSameDigest) {
  EXPECT_EQ(fingerprint("POST", "/pay", "{\"amount\":1}"), fingerprint("POST", "/pay", "{\"amount\":1}"));
}

TEST(Fingerprint, MethodTargetAndBodyEachCount) {
  const auto base = fingerprint("POST", "/pay", "a");
  EXPECT_NE(base, fingerprint("PUT", "/pay", "a"));
  EXPECT_NE(base, fingerprint("POST", "/pay?x", "a"));
  EXPECT_NE(base, fingerprint("POST", "/pay", "b"));
  // Part boundaries are in the digest: moving a byte from target to body is another request.
  EXPECT_NE(fingerprint("POST", "/a", "b"), fingerprint("POST", "/", "ab"));
}

TEST(Fingerprint, IsSha256OfLengthPrefixedParts) {
  // One empty part: SHA-256 of eight zero bytes.
  Sha256 h;
  h.part("");
  EXPECT_EQ(hex(h.finish()), "af5570f5a1810b7af78caf4bc70a660f0df51e42baf91d4de5b2328de0e83dfc");
}

TEST(Record, RoundTrips) {
  const auto fp = fingerprint("POST", "/", "x");
  const auto pending = encode_pending(fp, "token123");
  auto e = decode(pending);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->state, State::pending);
  EXPECT_EQ(e->fingerprint, fp);
  EXPECT_EQ(e->token, "token123");

  const auto stored = encode_stored(fp, 201, "X-A: 1\r\n", std::string("body\0with nul", 13));
  e = decode(stored);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->state, State::stored);
  EXPECT_EQ(e->status, 201u);
  EXPECT_EQ(e->fields, "X-A: 1\r\n");
  EXPECT_EQ(e->body, std::string_view("body\0with nul", 13));

  e = decode(encode_not_stored(fp, 200));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->state, State::not_stored);
  EXPECT_EQ(e->status, 200u);
}

TEST(Record, RefusesWhatIsNotARecord) {
  EXPECT_FALSE(decode(""));
  EXPECT_FALSE(decode("S short"));
  auto stored = encode_stored(fingerprint("POST", "/", ""), 200, "X: y\r\n", "b");
  stored.resize(1 + 32 + 8 + 2);  // fields length says 6, only 2 left
  EXPECT_FALSE(decode(stored));
}

}  // namespace
}  // namespace sluice::idempotency
