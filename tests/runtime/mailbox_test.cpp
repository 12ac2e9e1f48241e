// The worker's mailbox: how the control thread reaches an io_context that runs without locks.
// The io_contexts here use the worker's hint (BOOST_ASIO_CONCURRENCY_HINT_UNSAFE), and the
// cross-thread tests run under ThreadSanitizer in CI (.ci/run), which would report a producer
// that touched the io_context itself.
#include "sluice/runtime/mailbox.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <gtest/gtest.h>

namespace sluice {
namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;

struct MailboxTest : ::testing::Test {
  net::io_context io{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE};
  Mailbox mailbox{io};
};

TEST_F(MailboxTest, TasksPostedBeforeTheLoopStartsRunInOrderOnItsThread) {
  std::vector<int> ran;
  for (int i = 0; i < 5; ++i) mailbox.post([&ran, i] { ran.push_back(i); });
  mailbox.post([this] { mailbox.close(); });
  net::co_spawn(io, mailbox.run(), net::detached);
  io.run();  // returns: close() ended run(), and nothing else is queued
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST_F(MailboxTest, APostFromAnotherThreadWakesALoopBlockedInTheReactor) {
  std::promise<std::thread::id> ran_on;
  auto ran = ran_on.get_future();
  net::co_spawn(io, mailbox.run(), net::detached);
  std::thread loop([this] { io.run(); });
  // Posted while the loop is running: it may already sleep in epoll_wait, with nothing but the
  // mailbox's descriptor to wake it.
  mailbox.post([&] {
    ran_on.set_value(std::this_thread::get_id());
    mailbox.close();
  });
  ASSERT_EQ(ran.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(ran.get(), loop.get_id());
  loop.join();
}

TEST_F(MailboxTest, EveryTaskOfSeveralProducersRunsOnceAndEachProducersInOrder) {
  constexpr int producers = 4;
  constexpr int per_producer = 2000;
  std::vector<std::vector<int>> seen(producers);  // loop thread only
  std::atomic<int> left{producers * per_producer};
  net::co_spawn(io, mailbox.run(), net::detached);
  std::thread loop([this] { io.run(); });
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < per_producer; ++i) {
        mailbox.post([&, p, i] {
          seen[p].push_back(i);
          if (--left == 0) mailbox.close();
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  loop.join();  // ends only once the last task closed the mailbox
  for (int p = 0; p < producers; ++p) {
    ASSERT_EQ(seen[p].size(), static_cast<std::size_t>(per_producer)) << "producer " << p;
    for (int i = 0; i < per_producer; ++i) ASSERT_EQ(seen[p][i], i) << "producer " << p;
  }
}

TEST_F(MailboxTest, ATaskMayPostAnotherThatRunsInALaterBatch) {
  std::vector<int> ran;
  mailbox.post([&] {
    ran.push_back(1);
    mailbox.post([&] {
      ran.push_back(3);
      mailbox.close();
    });
  });
  mailbox.post([&] { ran.push_back(2); });
  net::co_spawn(io, mailbox.run(), net::detached);
  io.run();
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
}

TEST_F(MailboxTest, WhatIsPostedAfterCloseWaitsForDrain) {
  int ran = 0;
  mailbox.post([&] { mailbox.close(); });
  net::co_spawn(io, mailbox.run(), net::detached);
  io.run();
  mailbox.post([&] { ++ran; });
  mailbox.post([&] { ++ran; });
  io.restart();
  io.poll();  // the loop is gone: nothing runs the mailbox
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(mailbox.drain(), 2u);
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(mailbox.drain(), 0u);
}

TEST_F(MailboxTest, TheLoopGoesOnRunningOtherWorkBetweenBatches) {
  // The mailbox is one coroutine among the worker's: a timer set by a task fires while the
  // mailbox waits for its next post.
  net::steady_timer timer(io);
  bool fired = false;
  mailbox.post([&] {
    timer.expires_after(1ms);
    timer.async_wait([&](boost::system::error_code ec) {
      fired = !ec;
      mailbox.close();
    });
  });
  net::co_spawn(io, mailbox.run(), net::detached);
  io.run();  // returns once the timer fired and the mailbox's wait was cancelled
  EXPECT_TRUE(fired);
}

TEST_F(MailboxTest, QueuedTasksAreDestroyedWithTheMailbox) {
  auto held = std::make_shared<int>(7);
  std::weak_ptr<int> watch = held;
  {
    net::io_context other{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE};
    Mailbox unread(other);
    unread.post([held = std::move(held)] {});
    EXPECT_FALSE(watch.expired());
  }
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace sluice
