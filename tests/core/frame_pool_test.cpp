// FramePool's size classes and limits, and member coroutines of an opted-in class running on Asio
// with their frames from the pool: values, exceptions, nested awaitables of every kind.
#include "sluice/core/frame_pool.hpp"
#include "sluice/core/pooled_frame.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sluice {
namespace {

namespace net = boost::asio;

TEST(FramePool, WithoutAPoolFramesUseTheHeap) {
  void* p = FramePool::allocate(100);
  ASSERT_NE(p, nullptr);
  FramePool::deallocate(p, 100);
  FramePool pool;
  EXPECT_EQ(pool.kept(), 0u);  // not this thread's pool: it saw nothing
}

TEST(FramePool, ABlockIsReusedWithinItsSizeClass) {
  FramePool pool;
  const FramePool::Use use(pool);
  void* a = FramePool::allocate(100);  // class 65..128
  EXPECT_EQ(pool.fresh(), 1u);
  FramePool::deallocate(a, 100);
  EXPECT_EQ(pool.kept(), 1u);
  void* b = FramePool::allocate(128);  // same class
  EXPECT_EQ(b, a);
  EXPECT_EQ(pool.reused(), 1u);
  void* c = FramePool::allocate(129);  // next class: not the kept block
  EXPECT_NE(c, a);
  FramePool::deallocate(b, 128);
  FramePool::deallocate(c, 129);
  EXPECT_EQ(pool.kept(), 2u);
}

// As BlockPool::shed(): the blocks no allocation needed since the last shed() are freed, per class.
TEST(FramePool, ShedFreesTheBlocksUnusedSinceTheLastShed) {
  FramePool pool;
  const FramePool::Use use(pool);
  std::vector<void*> burst;
  for (int i = 0; i < 6; ++i) burst.push_back(FramePool::allocate(100));
  for (void* p : burst) FramePool::deallocate(p, 100);
  EXPECT_EQ(pool.shed(), 0u);  // the first interval began with none kept
  EXPECT_EQ(pool.kept(), 6u);
  void* a = FramePool::allocate(100);
  void* b = FramePool::allocate(100);
  FramePool::deallocate(a, 100);
  FramePool::deallocate(b, 100);
  EXPECT_EQ(pool.shed(), 4u * 128);  // two were needed at once, four never
  EXPECT_EQ(pool.kept(), 2u);
  EXPECT_EQ(pool.shed(), 2u * 128);  // none needed since
  EXPECT_EQ(pool.kept(), 0u);
}

TEST(FramePool, LargeFramesAreNotKept) {
  FramePool pool;
  const FramePool::Use use(pool);
  const std::size_t large = FramePool::granule * FramePool::classes + 1;
  FramePool::deallocate(FramePool::allocate(large), large);
  EXPECT_EQ(pool.kept(), 0u);
  EXPECT_EQ(pool.fresh(), 0u);
}

TEST(FramePool, KeepsAtMostItsLimitPerClass) {
  FramePool pool;
  const FramePool::Use use(pool);
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < FramePool::max_per_class + 10; ++i) blocks.push_back(FramePool::allocate(64));
  for (void* p : blocks) FramePool::deallocate(p, 64);
  EXPECT_EQ(pool.kept(), FramePool::max_per_class);
  // Large classes are bounded by bytes: 128 blocks of 2 KiB.
  blocks.clear();
  const std::size_t big = FramePool::granule * FramePool::classes;
  for (int i = 0; i < 200; ++i) blocks.push_back(FramePool::allocate(big));
  for (void* p : blocks) FramePool::deallocate(p, big);
  EXPECT_EQ(pool.kept(), FramePool::max_per_class + 128);
}

TEST(FramePool, KeepsBlocksAllocatedBeforeItWasInstalled) {
  void* p = FramePool::allocate(200);  // no pool: from the heap, in the class's rounded size
  FramePool pool;
  {
    const FramePool::Use use(pool);
    FramePool::deallocate(p, 200);
    EXPECT_EQ(pool.kept(), 1u);
    EXPECT_EQ(FramePool::allocate(220), p);  // 193..256 bytes: one class
    FramePool::deallocate(p, 220);
  }
  // Uninstalled: frames go back to the heap, the pool keeps what it had.
  FramePool::deallocate(FramePool::allocate(220), 220);
  EXPECT_EQ(pool.kept(), 1u);
  EXPECT_EQ(pool.reused(), 1u);
}

TEST(FramePool, UsesNest) {
  FramePool outer, inner;
  const FramePool::Use a(outer);
  {
    const FramePool::Use b(inner);
    FramePool::deallocate(FramePool::allocate(64), 64);
  }
  FramePool::deallocate(FramePool::allocate(64), 64);
  EXPECT_EQ(inner.kept(), 1u);
  EXPECT_EQ(outer.kept(), 1u);
}

// A class whose member coroutines take their frames from the pool (declared, opted in, then
// defined: a coroutine's definition is where its promise type is chosen).
struct Pooled {
  net::awaitable<int> leaf(int x);
  net::awaitable<void> fail();
  net::awaitable<int> middle(int x);
  static net::awaitable<int> plain(int x) { co_return x * 10; }  // not a member call: Asio's frame
};

}  // namespace
}  // namespace sluice

SLUICE_POOLED_COROUTINES(sluice::Pooled);

namespace sluice {
namespace {

net::awaitable<int> Pooled::leaf(int x) {
  net::steady_timer t(co_await net::this_coro::executor);
  t.expires_after(std::chrono::milliseconds(0));
  co_await t.async_wait(net::use_awaitable);  // an asynchronous operation
  co_return x + 1;
}

net::awaitable<void> Pooled::fail() {
  co_await leaf(0);
  throw std::runtime_error("boom");
}

net::awaitable<int> Pooled::middle(int x) {
  using namespace net::experimental::awaitable_operators;
  const int a = co_await leaf(x);  // a pooled frame awaiting a pooled frame
  const auto [b, c] = co_await (leaf(a) && plain(a));  // Asio's operators over both kinds
  int caught = 0;
  try {
    co_await fail();
  } catch (const std::runtime_error&) {
    caught = 1;
  }
  co_return b + c + caught;
}

TEST(PooledCoroutines, RunOnAsioWithTheirFramesFromThePool) {
  net::io_context io;
  FramePool pool;
  const FramePool::Use use(pool);
  Pooled object;
  const auto run_once = [&] {
    int result = 0;
    net::co_spawn(io, object.middle(1), [&](std::exception_ptr e, int r) {
      ASSERT_FALSE(e);
      result = r;
    });
    io.restart();
    io.run();
    return result;
  };
  EXPECT_EQ(run_once(), 3 + 20 + 1);  // leaf(1) = 2; leaf(2) = 3, plain(2) = 20; caught
  const auto fresh = pool.fresh();
  EXPECT_GT(fresh, 0u);
  EXPECT_GT(pool.kept(), 0u);  // every frame came back
  EXPECT_EQ(run_once(), 24);
  EXPECT_EQ(pool.fresh(), fresh);  // the second run allocated no frame from the heap
  EXPECT_GE(pool.reused(), 5u);    // middle, leaf x3, fail
}

}  // namespace
}  // namespace sluice
