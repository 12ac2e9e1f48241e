// BlockPool and its owning handle, PooledBlock (core/arena.hpp): a block goes back to its pool
// exactly once, when its last owner lets go of it.
#include "sluice/core/arena.hpp"

#include <gtest/gtest.h>

#include <utility>

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
