#include "sluice/runtime/fd_budget.hpp"

#include <sys/resource.h>

#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

namespace sluice {
namespace {

TEST(FdBudget, TwoDescriptorsPerConnectionAfterTheReserve) {
  EXPECT_EQ(connections_within(128, 64, 10000), 32u);
  EXPECT_EQ(connections_within(1024, 64 + 96, 10000), 432u);
}

TEST(FdBudget, NeverAboveMaxConnections) {
  EXPECT_EQ(connections_within(1'000'000, 64, 10000), 10000u);
  EXPECT_EQ(connections_within(UINT64_MAX, 64, 4), 4u);
}

TEST(FdBudget, AtLeastOneConnectionEvenWhenTheReserveTakesEverything) {
  EXPECT_EQ(connections_within(50, 64, 10000), 1u);
  EXPECT_EQ(connections_within(0, 0, 10000), 1u);
}

TEST(FdBudget, IdlePoolIsKeepaliveAndItsSurplusPerServerPerWorker) {
  auto r = config::load_string(
      "[upstreams.a]\nkeepalive = 8\n[[upstreams.a.servers]]\naddress = \"127.0.0.1:1\"\n"
      "[[upstreams.a.servers]]\naddress = \"127.0.0.1:2\"\n"
      "[upstreams.b]\n[[upstreams.b.servers]]\naddress = \"127.0.0.1:3\"\n"
      "[[route]]\npath_prefix = \"/\"\nupstream = \"a\"\n"
      "[[route]]\npath_prefix = \"/b\"\nupstream = \"b\"\n",
      "t.toml");
  ASSERT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0].to_string());
  // a: 8 x 2 servers, b: the default 32 x 1 server; times the surplus factor (2), times 3 workers.
  EXPECT_EQ(max_idle_pooled(*r.config, 3), (8u * 2 + 32u) * 2 * 3);
}

TEST(FdBudget, RaiseFdLimitReachesTheHardLimit) {
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  const auto now = raise_fd_limit();
  rlimit after{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &after), 0);
  EXPECT_EQ(now, after.rlim_cur);
  EXPECT_GE(after.rlim_cur, before.rlim_cur);
  if (before.rlim_max != RLIM_INFINITY) EXPECT_EQ(after.rlim_cur, before.rlim_max);
}

}  // namespace
}  // namespace sluice
