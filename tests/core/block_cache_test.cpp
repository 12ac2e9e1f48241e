#include "sluice/core/block_cache.hpp"

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace sluice {
namespace {

namespace mem = block_cache;

TEST(BlockCache, ClassesArePowersOfTwoAndOneAndAHalfTimesThem) {
  EXPECT_EQ(mem::capacity_for(1), 16u);
  EXPECT_EQ(mem::capacity_for(16), 16u);
  EXPECT_EQ(mem::capacity_for(17), 24u);
  EXPECT_EQ(mem::capacity_for(25), 32u);
  EXPECT_EQ(mem::capacity_for(33), 48u);
  EXPECT_EQ(mem::capacity_for(4096), 4096u);
  EXPECT_EQ(mem::capacity_for(16709), 24576u);  // a TLS record buffer
  EXPECT_EQ(mem::capacity_for(mem::largest_cached), mem::largest_cached);
  EXPECT_EQ(mem::capacity_for(mem::largest_cached + 1), mem::largest_cached + 1);
}

TEST(BlockCache, AFreedBlockServesTheNextAllocationOfItsClass) {
  auto* p = static_cast<char*>(mem::allocate(17000));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u);
  std::memset(p, 'x', 17000);
  const auto before = mem::this_thread();
  mem::release(p);
  EXPECT_EQ(mem::this_thread().cached_blocks, before.cached_blocks + 1);
  EXPECT_EQ(mem::this_thread().cached_bytes, before.cached_bytes + 24576);
  void* q = mem::allocate(20000);  // the same class
  EXPECT_EQ(q, p);
  EXPECT_EQ(mem::this_thread().taken_from_cache, before.taken_from_cache + 1);
  EXPECT_EQ(mem::this_thread().cached_blocks, before.cached_blocks);
  void* other = mem::allocate(30000);  // another class: from the heap
  EXPECT_NE(other, p);
  mem::release(q);
  mem::release(other);
}

TEST(BlockCache, MallocSemanticsForZeroAndNull) {
  EXPECT_EQ(mem::allocate(0), nullptr);
  mem::release(nullptr);
  void* p = mem::reallocate(nullptr, 40);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(mem::reallocate(p, 0), nullptr);  // released
}

TEST(BlockCache, ReallocateKeepsTheBytes) {
  auto* p = static_cast<char*>(mem::allocate(20));
  std::memcpy(p, "0123456789abcdefghi", 20);
  EXPECT_EQ(mem::reallocate(p, 24), p);  // within its class's capacity
  auto* grown = static_cast<char*>(mem::reallocate(p, 5000));
  ASSERT_NE(grown, nullptr);
  EXPECT_STREQ(grown, "0123456789abcdefghi");
  auto* large = static_cast<char*>(mem::reallocate(grown, mem::largest_cached + 100));
  ASSERT_NE(large, nullptr);
  EXPECT_STREQ(large, "0123456789abcdefghi");
  auto* larger = static_cast<char*>(mem::reallocate(large, 4 * mem::largest_cached));
  ASSERT_NE(larger, nullptr);
  EXPECT_STREQ(larger, "0123456789abcdefghi");
  mem::release(larger);  // uncached: back to the heap
}

TEST(BlockCache, TheCacheIsBounded) {
  mem::shed();
  mem::shed();  // nothing cached from the tests before
  const auto before = mem::this_thread();
  std::vector<void*> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(mem::allocate(mem::largest_cached));
  for (void* b : blocks) mem::release(b);
  const auto after = mem::this_thread();
  EXPECT_LE(after.cached_blocks - before.cached_blocks, 16u);  // 16 of the largest class at most
  std::vector<void*> small;
  for (int i = 0; i < 100000; ++i) small.push_back(mem::allocate(16));  // 1.6 MB of one class
  for (void* b : small) mem::release(b);
  EXPECT_LE(mem::this_thread().cached_bytes, before.cached_bytes + 16 * mem::largest_cached + 1024 * 1024);
  // However many classes are freed into, the thread holds at most cache_limit_bytes.
  std::vector<void*> all;
  for (std::size_t size = 16; size <= mem::largest_cached; size += size / 2)
    for (int i = 0; i < 128; ++i) all.push_back(mem::allocate(size));
  for (void* b : all) mem::release(b);
  EXPECT_LE(mem::this_thread().cached_bytes, mem::cache_limit_bytes);
}

// shed() frees what no allocation took since the last call: blocks taken and given back in
// between stay, the rest goes.
TEST(BlockCache, ShedFreesWhatTheLastIntervalDidNotNeed) {
  mem::shed();
  mem::shed();
  ASSERT_EQ(mem::this_thread().cached_blocks, 0u);
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(mem::allocate(300));
  for (void* b : blocks) mem::release(b);
  mem::shed();  // the 10 came back after the last shed: none was taken from the list since
  EXPECT_EQ(mem::this_thread().cached_blocks, 10u);
  for (int i = 0; i < 4; ++i) blocks[i] = mem::allocate(300);  // 6 left unused this interval
  for (int i = 0; i < 4; ++i) mem::release(blocks[i]);
  EXPECT_EQ(mem::shed(), 6 * mem::capacity_for(300));
  EXPECT_EQ(mem::this_thread().cached_blocks, 4u);
  EXPECT_EQ(mem::shed(), 4 * mem::capacity_for(300));  // untouched for a whole interval
  EXPECT_EQ(mem::this_thread().cached_blocks, 0u);
}

TEST(BlockCache, ABlockFreedOnAnotherThreadIsCachedThereAndFreedWhenItEnds) {
  void* p = mem::allocate(3000);
  mem::Stats there;
  std::thread t([&] {
    mem::release(p);
    there = mem::this_thread();
  });
  t.join();  // its cache emptied as it ended (LeakSanitizer and valgrind check the rest)
  EXPECT_EQ(there.cached_blocks, 1u);
  EXPECT_EQ(there.cached_bytes, mem::capacity_for(3000));
}

TEST(BlockCache, AllocateZeroedClearsAReusedBlock) {
  void* p = mem::allocate(100);
  std::memset(p, 0xab, 100);
  mem::release(p);
  auto* q = static_cast<unsigned char*>(mem::allocate_zeroed(10, 10));
  EXPECT_EQ(q, p);  // the same block, from the cache
  for (int i = 0; i < 100; ++i) EXPECT_EQ(q[i], 0) << i;
  mem::release(q);
  EXPECT_EQ(mem::allocate_zeroed(SIZE_MAX / 2, 4), nullptr);
}

}  // namespace
}  // namespace sluice
