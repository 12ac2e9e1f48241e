#include "sluice/core/per_worker.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

namespace sluice {
namespace {

// Slots are a cache line apart (no false sharing between workers), indexed by worker modulo the
// size, and summed by for_each.
TEST(PerWorker, SlotsAreCacheLinesApartAndWrapAround) {
  PerWorker<std::atomic<std::uint64_t>> counters(3);
  EXPECT_EQ(counters.size(), 3u);
  const auto distance = reinterpret_cast<std::uintptr_t>(&counters[1]) -
                        reinterpret_cast<std::uintptr_t>(&counters[0]);
  EXPECT_GE(distance, PerWorker<int>::line);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(&counters[0]) % PerWorker<int>::line, 0u);
  EXPECT_EQ(&counters[4], &counters[1]);
  EXPECT_EQ(PerWorker<int>(0).size(), 1u);
  EXPECT_EQ(PerWorker<int>().size(), default_worker_slots);
}

TEST(PerWorker, EachThreadCountsInItsOwnSlotAndTheSumIsExact) {
  PerWorker<std::atomic<std::uint64_t>> counters(4);
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (int i = 0; i < 10000; ++i) add_own<std::uint64_t>(counters[w]);
    });
  for (auto& t : threads) t.join();
  std::uint64_t total = 0;
  std::as_const(counters).for_each([&](const auto& c) { total += c.load(); });
  EXPECT_EQ(total, 40000u);
}

}  // namespace
}  // namespace sluice
