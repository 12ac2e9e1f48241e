// The fleet's ticket key ring: its Redis encoding, and what the lease holder writes.
#include "sluice/runtime/fleet_tickets.hpp"

#include <gtest/gtest.h>

namespace sluice::fleet {
namespace {

using namespace std::chrono_literals;

TEST(FleetTicketRing, EncodesAndDecodesAndRefusesOtherBytes) {
  const TicketKeyRing ring{7, 1'700'000'000'123, {tls::TicketKey::random(), tls::TicketKey::random()}};
  const auto bytes = encode_ring(ring);
  EXPECT_EQ(bytes.size(), 16u + 2 * tls::ticket_key_bytes);
  EXPECT_EQ(decode_ring(bytes), ring);
  EXPECT_EQ(decode_ring(""), std::nullopt);
  EXPECT_EQ(decode_ring(bytes.substr(0, 16)), std::nullopt);  // no key
  EXPECT_EQ(decode_ring(bytes.substr(0, bytes.size() - 1)), std::nullopt);
  EXPECT_EQ(decode_ring(bytes + bytes.substr(16) + bytes.substr(16)), std::nullopt);  // four keys
}

TEST(FleetTicketRing, TheFirstRingHasANextAndACurrentKey) {
  const auto first = next_ring(std::nullopt, std::nullopt, 1000, 10s);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->generation, 1u);
  EXPECT_EQ(first->rotated_ms, 1000);
  ASSERT_EQ(first->keys.size(), 2u);
  EXPECT_NE(first->keys[0], first->keys[1]);
}

TEST(FleetTicketRing, ARingRedisLostIsWrittenBackAsHeld) {
  const TicketKeyRing held{4, 500, {tls::TicketKey::random(), tls::TicketKey::random()}};
  EXPECT_EQ(next_ring(std::nullopt, held, 100'000, 10s), held);
}

TEST(FleetTicketRing, RotationShiftsNextToCurrentAndDropsThePrevious) {
  const TicketKeyRing ring{3, 1000, {tls::TicketKey::random(), tls::TicketKey::random(), tls::TicketKey::random()}};
  EXPECT_EQ(next_ring(ring, ring, 1000 + 9'999, 10s), std::nullopt);  // not due
  const auto next = next_ring(ring, ring, 1000 + 10'000, 10s);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->generation, 4u);
  EXPECT_EQ(next->rotated_ms, 11'000);
  ASSERT_EQ(next->keys.size(), 3u);
  EXPECT_EQ(next->keys[1], ring.keys[0]);  // the next key now encrypts
  EXPECT_EQ(next->keys[2], ring.keys[1]);  // the current one still decrypts
  for (const auto& k : ring.keys) EXPECT_NE(next->keys[0], k);
}

TEST(FleetTicketRing, AListenerEncryptsWithTheCurrentKey) {
  const TicketKeyRing ring{3, 1000, {tls::TicketKey::random(), tls::TicketKey::random(), tls::TicketKey::random()}};
  const auto keys = listener_order(ring);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0], ring.keys[1]);
  EXPECT_EQ(keys[1], ring.keys[0]);
  EXPECT_EQ(keys[2], ring.keys[2]);
}

}  // namespace
}  // namespace sluice::fleet
