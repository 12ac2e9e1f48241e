// StringPool: capacity comes back with take(), within the pool's count and size bounds.
#include "sluice/core/string_pool.hpp"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(StringPool, TakeGivesBackTheCapacityOfAKeptString) {
  StringPool pool(4, 4096);
  EXPECT_TRUE(pool.take().empty());  // nothing kept yet: a plain empty string
  std::string s;
  s.reserve(600);
  s = "GET / HTTP/1.1\r\n";
  const auto* data = s.data();
  pool.keep(std::move(s));
  EXPECT_EQ(pool.size(), 1u);
  auto again = pool.take();
  EXPECT_TRUE(again.empty());
  EXPECT_GE(again.capacity(), 600u);
  EXPECT_EQ(again.data(), data);  // the same block, not a copy
  EXPECT_EQ(pool.size(), 0u);
}

TEST(StringPool, KeepsAtMostItsCapAndNoOversizedOrInlineStrings) {
  StringPool pool(2, 1024);
  std::string big;
  big.reserve(8192);
  pool.keep(std::move(big));  // grew for an unusual head: back to the heap
  pool.keep(std::string("short"));  // inline buffer only: nothing to keep
  EXPECT_EQ(pool.size(), 0u);
  for (int i = 0; i < 3; ++i) {
    std::string s;
    s.reserve(300);
    pool.keep(std::move(s));
  }
  EXPECT_EQ(pool.size(), 2u);
}

// As BlockPool::shed(): the strings no take() needed since the last shed() are freed.
TEST(StringPool, ShedFreesTheStringsUnusedSinceTheLastShed) {
  StringPool pool(8, 1024);
  for (int i = 0; i < 4; ++i) {
    std::string s;
    s.reserve(300);
    pool.keep(std::move(s));
  }
  auto taken = pool.take();
  pool.keep(std::move(taken));
  EXPECT_EQ(pool.shed(), 0u);  // before this first interval's low-water mark: nothing free
  taken = pool.take();
  pool.keep(std::move(taken));
  EXPECT_GE(pool.shed(), 3u * 300);  // three never taken in this interval
  EXPECT_EQ(pool.size(), 1u);
  pool.shed();
  EXPECT_EQ(pool.size(), 0u);
}

}  // namespace
}  // namespace sluice
