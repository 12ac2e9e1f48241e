#include "sluice/balancer/backup.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sluice/balancer/hash.hpp"
#include "sluice/balancer/registry.hpp"
#include "sluice/config/config.hpp"
#include "test_pool.hpp"

namespace sluice {
namespace {

using balancer_test::counts;
using balancer_test::picks;
using balancer_test::TestPool;
using Seq = std::vector<std::uint32_t>;

// [p0, b1, p2, b3]: backups interleaved, so that index translation is exercised.
TestPool mixed_pool() {
  TestPool p(4);
  p[1].set_backup(true);
  p[3].set_backup(true);
  return p;
}

PickContext context_for(const std::string& policy, int i) {
  PickContext ctx;
  if (policy == "hash") {
    ctx.hash = hash_key_bytes("key" + std::to_string(i));
    ctx.has_hash = true;
  }
  return ctx;
}

class BackupPolicies : public ::testing::TestWithParam<std::string> {};

TEST_P(BackupPolicies, BackupsGetNothingWhileAPrimaryIsAvailable) {
  auto p = mixed_pool();
  auto b = make_balancer(*config::from_name<config::Balance>(GetParam()), p.span(), BalancerOptions{});
  ASSERT_NE(dynamic_cast<BackupAware*>(b.get()), nullptr);
  Seq seq;
  for (int i = 0; i < 100; ++i) seq.push_back(b->pick(context_for(GetParam(), i)).index);
  const auto c = counts(seq, p.size());
  EXPECT_EQ(c[1] + c[3], 0);
  EXPECT_GT(c[0], 0);
  EXPECT_GT(c[2], 0);

  // One primary left: it takes everything.
  p[0].set_state(ServerState::down);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(b->pick(context_for(GetParam(), i)).index, 2u);
}

TEST_P(BackupPolicies, BackupsTakeEverythingWhenNoPrimaryIsAvailable) {
  auto p = mixed_pool();
  auto b = make_balancer(*config::from_name<config::Balance>(GetParam()), p.span(), BalancerOptions{});
  p[0].set_state(ServerState::down);
  p[2].set_draining(true);
  Seq seq;
  for (int i = 0; i < 100; ++i) seq.push_back(b->pick(context_for(GetParam(), i)).index);
  const auto c = counts(seq, p.size());
  EXPECT_EQ(c[0] + c[2], 0);
  EXPECT_EQ(c[1] + c[3], 100);
  EXPECT_GT(c[1], 0);
  EXPECT_GT(c[3], 0);

  // A primary is back: the backups are idle again.
  p[2].set_draining(false);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(b->pick(context_for(GetParam(), i)).index, 2u);
}

TEST_P(BackupPolicies, RetryAfterEveryPrimaryGoesToABackup) {
  auto p = mixed_pool();
  auto b = make_balancer(*config::from_name<config::Balance>(GetParam()), p.span(), BalancerOptions{});
  TriedSet tried;
  auto ctx = context_for(GetParam(), 1);
  ctx.tried = &tried;
  std::vector<std::uint32_t> order;
  for (int i = 0; i < 4; ++i) {
    const auto pick = b->pick(ctx);
    ASSERT_TRUE(pick);
    order.push_back(pick.index);
    tried.add(pick.index);
  }
  EXPECT_FALSE(b->pick(ctx));
  // Primaries first, then backups, each server once.
  EXPECT_TRUE((order[0] == 0 && order[1] == 2) || (order[0] == 2 && order[1] == 0));
  EXPECT_TRUE((order[2] == 1 && order[3] == 3) || (order[2] == 3 && order[3] == 1));
}

TEST_P(BackupPolicies, PrimariesAtMaxConnsSpillToBackups) {
  auto p = mixed_pool();
  auto b = make_balancer(*config::from_name<config::Balance>(GetParam()), p.span(), BalancerOptions{});
  p[0].set_max_conns(1);
  p[2].set_max_conns(1);
  p[0].begin_request();
  p[2].begin_request();
  const auto pick = b->pick(context_for(GetParam(), 3));
  EXPECT_TRUE(pick.index == 1 || pick.index == 3);
}

TEST_P(BackupPolicies, OnlyBackupsConfigured) {
  TestPool p(2);
  p[0].set_backup(true);
  p[1].set_backup(true);
  auto b = make_balancer(*config::from_name<config::Balance>(GetParam()), p.span(), BalancerOptions{});
  const auto c = counts(Seq{b->pick(context_for(GetParam(), 0)).index,
                            b->pick(context_for(GetParam(), 1)).index},
                        p.size());
  EXPECT_EQ(c[0] + c[1], 2);
}

TEST_P(BackupPolicies, PanicIgnoresHealthButNotDrainingLimitsOrTried) {
  auto p = mixed_pool();
  auto b = make_balancer(*config::from_name<config::Balance>(GetParam()), p.span(), BalancerOptions{});
  for (std::size_t i = 0; i < p.size(); ++i) p[i].set_state(ServerState::down);
  EXPECT_FALSE(b->pick(context_for(GetParam(), 0)));
  // when_all_down = "panic": the forwarder asks again with panic set; primaries come first.
  auto ctx = context_for(GetParam(), 0);
  ctx.panic = true;
  const auto first = b->pick(ctx);
  EXPECT_TRUE(first.index == 0 || first.index == 2);
  p[0].set_draining(true);
  p[2].set_max_conns(1);
  p[2].begin_request();
  TriedSet tried;
  tried.add(1);
  ctx.tried = &tried;
  EXPECT_EQ(b->pick(ctx).index, 3u);
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, BackupPolicies,
                         ::testing::Values("round_robin", "weighted", "least_conn", "hash", "p2c", "least_time"));

TEST(Backup, RoundRobinTiersKeepTheirOwnOrder) {
  auto p = mixed_pool();
  auto b = make_balancer(config::Balance::round_robin, p.span(), BalancerOptions{});
  EXPECT_EQ(picks(*b, 4), (Seq{0, 2, 0, 2}));
  p[0].set_state(ServerState::down);
  p[2].set_state(ServerState::down);
  EXPECT_EQ(picks(*b, 4), (Seq{1, 3, 1, 3}));
}

TEST(Backup, WithoutBackupsThePolicyIsNotWrapped) {
  TestPool p(3);
  for (const auto name : config::Words<config::Balance>::words) {
    auto b = make_balancer(*config::from_name<config::Balance>(name), p.span(), BalancerOptions{});
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(dynamic_cast<BackupAware*>(b.get()), nullptr) << name;
  }
}

TEST(BackupConcurrency, ThreadsWhilePrimariesComeAndGo) {
  auto p = mixed_pool();
  auto b = make_balancer(config::Balance::weighted, p.span(), BalancerOptions{});
  std::atomic<bool> done{false};
  std::thread control([&] {
    for (int k = 0; !done.load(std::memory_order_relaxed); ++k) {
      p[0].set_state(k % 2 ? ServerState::down : ServerState::up);
      std::this_thread::yield();
    }
  });
  const auto hits = balancer_test::pick_concurrently(*b, p, 2, 20000, balancer_test::no_key);
  done = true;
  control.join();
  EXPECT_EQ(hits[1] + hits[3], 0);  // p2 stayed up throughout
  EXPECT_EQ(hits.back(), 0);
}

TEST(Registry, KnowsEveryPolicy) {
  const auto& words = config::Words<config::Balance>::words;
  const std::vector<std::string_view> names(words.begin(), words.end());
  EXPECT_EQ(names,
            (std::vector<std::string_view>{"round_robin", "weighted", "least_conn", "hash", "p2c", "least_time"}));
  EXPECT_EQ(config::from_name<config::Balance>("random"), std::nullopt);
  TestPool p(2);
  config::UpstreamConfig cfg;
  cfg.balance = config::Balance::hash;
  EXPECT_NE(dynamic_cast<ConsistentHash*>(make_balancer(cfg.balance, p.span(), cfg).get()), nullptr);
}

// c = 1: no server may go above the mean (rounded up), so 8 requests of one hot key over 4
// servers end up 2 on each.
void expect_hot_key_spread_evenly(Balancer& b, TestPool& p) {
  PickContext ctx;
  ctx.hash = hash_key_bytes("hot");
  ctx.has_hash = true;
  for (int i = 0; i < 8; ++i) p[b.pick(ctx).index].begin_request();
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_EQ(p[i].in_flight(), 2) << i;
}

TEST(Registry, PassesTheHashBalanceFactor) {
  TestPool p(4);
  auto b = make_balancer(config::Balance::hash, p.span(), BalancerOptions{.hash_balance_factor = 1.0});
  expect_hot_key_spread_evenly(*b, p);
}

TEST(Registry, ReadsTheHashBalanceFactorFromTheUpstreamConfig) {
  TestPool p(4);
  config::UpstreamConfig cfg;
  cfg.hash_balance_factor = 1.0;
  auto b = make_balancer(config::Balance::hash, p.span(), cfg);
  expect_hot_key_spread_evenly(*b, p);
}

}  // namespace
}  // namespace sluice
