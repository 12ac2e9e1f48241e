// The per-second sample ring: order, overwrite of the oldest once full, newest(age), clear.
#include "sluice/telemetry/sample_ring.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace sluice::telemetry {
namespace {

std::vector<int> contents(const SampleRing<int>& ring) {
  std::vector<int> out;
  for (std::size_t i = 0; i < ring.size(); ++i) out.push_back(ring[i]);
  return out;
}

TEST(SampleRing, KeepsSamplesOldestFirstUntilFull) {
  SampleRing<int> ring(3);
  EXPECT_TRUE(ring.empty());
  ring.push(1);
  ring.push(2);
  EXPECT_EQ(contents(ring), (std::vector<int>{1, 2}));
  EXPECT_EQ(ring.newest(), 2);
  EXPECT_EQ(ring.newest(1), 1);
}

TEST(SampleRing, OverwritesTheOldestOnceFull) {
  SampleRing<int> ring(3);
  for (int i = 1; i <= 7; ++i) ring.push(i);
  EXPECT_EQ(ring.size(), 3U);
  EXPECT_EQ(ring.capacity(), 3U);
  EXPECT_EQ(contents(ring), (std::vector<int>{5, 6, 7}));
  EXPECT_EQ(ring.newest(0), 7);
  EXPECT_EQ(ring.newest(2), 5);
}

TEST(SampleRing, FiveMinutesOfSecondsKeepTheLast300) {
  SampleRing<int> ring(300);
  for (int i = 0; i < 1000; ++i) ring.push(i);
  EXPECT_EQ(ring.size(), 300U);
  EXPECT_EQ(ring[0], 700);
  EXPECT_EQ(ring.newest(), 999);
}

TEST(SampleRing, ClearEmptiesAndTheRingIsReusable) {
  SampleRing<int> ring(2);
  ring.push(1);
  ring.push(2);
  ring.push(3);
  ring.clear();
  EXPECT_TRUE(ring.empty());
  ring.push(4);
  EXPECT_EQ(contents(ring), (std::vector<int>{4}));
}

TEST(SampleRing, ZeroCapacityIsRefused) {
  EXPECT_THROW(SampleRing<int>(0), std::invalid_argument);
}

}  // namespace
}  // namespace sluice::telemetry
