// BlockPool and its owning handle, PooledBlock (core/arena.hpp): a block goes back to its pool
// exactly once, when its last owner lets go of it.
#include "sluice/core/arena.hpp"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace sluice {
namespace {

TEST(BlockPool, KeepsAtMostMaxFreeBlocksAndHandsThemOutAgain) {
  BlockPool pool(64, 2);
  char* a = pool.acquire();
  char* b = pool.acquire();
  char* c = pool.acquire();
  pool.release(a);
  pool.release(b);
  pool.release(c);  // beyond max_free: back to the heap
  EXPECT_EQ(pool.free_blocks(), 2u);
  EXPECT_EQ(pool.acquire(), b);  // the last one kept comes first
  EXPECT_EQ(pool.free_blocks(), 1u);
  pool.release(b);
  pool.release(nullptr);  // nothing
  EXPECT_EQ(pool.free_blocks(), 2u);
}

// A burst fills the free list; shed() frees only what no acquire() needed since the last shed(),
// so a steady demand keeps its blocks and a burst's surplus goes an interval after it ends.
TEST(BlockPool, ShedFreesTheBlocksUnusedSinceTheLastShed) {
  BlockPool pool(64, 16);
  std::vector<char*> burst;
  for (int i = 0; i < 10; ++i) burst.push_back(pool.acquire());
  for (char* b : burst) pool.release(b);
  EXPECT_EQ(pool.shed(), 0u);  // the interval began with none free: all ten were needed
  EXPECT_EQ(pool.free_blocks(), 10u);
  // A steady demand of three blocks at once in the next interval.
  for (int round = 0; round < 5; ++round) {
    char* a = pool.acquire();
    char* b = pool.acquire();
    char* c = pool.acquire();
    pool.release(a);
    pool.release(b);
    pool.release(c);
  }
  EXPECT_EQ(pool.shed(), 7u * 64);  // the seven the steady demand never reached
  EXPECT_EQ(pool.free_blocks(), 3u);
  char* a = pool.acquire();
  pool.release(a);
  EXPECT_EQ(pool.shed(), 2u * 64);  // demand fell to one
  EXPECT_EQ(pool.free_blocks(), 1u);
  EXPECT_EQ(pool.shed(), 1u * 64);  // an interval with no demand frees the rest
  EXPECT_EQ(pool.free_blocks(), 0u);
  EXPECT_EQ(pool.shed(), 0u);
}

TEST(PooledBlock, GoesBackToItsPoolOnceWhenItsLastOwnerEnds) {
  BlockPool pool(64, 4);
  char* block = pool.acquire();
  {
    PooledBlock first(pool, block);
    PooledBlock second(std::move(first));  // the move takes it: `first` gives nothing back
    EXPECT_EQ(first.get(), nullptr);
    EXPECT_EQ(second.get(), block);
    EXPECT_EQ(pool.free_blocks(), 0u);
  }
  EXPECT_EQ(pool.free_blocks(), 1u);
}

TEST(PooledBlock, MoveAssignmentGivesBackTheBlockItHeld) {
  BlockPool pool(64, 4);
  char* a = pool.acquire();
  char* b = pool.acquire();
  PooledBlock held(pool, a);
  held = PooledBlock(pool, b);
  EXPECT_EQ(pool.free_blocks(), 1u);  // a
  EXPECT_EQ(held.get(), b);
  held = std::move(held);  // itself: nothing changes
  EXPECT_EQ(held.get(), b);
  held.reset();
  EXPECT_EQ(held.get(), nullptr);
  EXPECT_EQ(pool.free_blocks(), 2u);
  PooledBlock empty;  // a default handle holds nothing and gives nothing back
  empty.reset();
  EXPECT_EQ(pool.free_blocks(), 2u);
}

}  // namespace
}  // namespace sluice
