#include "sluice/balancer/round_robin.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "sluice/upstream/endpoint.hpp"

namespace sluice {
namespace {

struct Pool {
  explicit Pool(int n) {
    for (int i = 0; i < n; ++i) {
      const auto port = static_cast<std::uint16_t>(9001 + i);
      owned.push_back(std::make_unique<Endpoint>(
          "s" + std::to_string(i), config::HostPort{"127.0.0.1", port},
          boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port), 1));
      raw.push_back(owned.back().get());
    }
  }
  std::vector<std::unique_ptr<Endpoint>> owned;
  std::vector<Endpoint*> raw;
};

std::vector<std::uint32_t> picks(Balancer& b, int n, const PickContext& ctx = {}) {
  std::vector<std::uint32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(b.pick(ctx).index);
  return out;
}

TEST(RoundRobin, CyclesInListOrder) {
  Pool p(3);
  RoundRobin rr(p.raw);
  EXPECT_EQ(picks(rr, 7), (std::vector<std::uint32_t>{0, 1, 2, 0, 1, 2, 0}));
}

TEST(RoundRobin, EmptyUpstreamPicksNothing) {
  RoundRobin rr(std::span<Endpoint* const>{});
  EXPECT_FALSE(rr.pick({}));
}

TEST(RoundRobin, SkipsUnavailableAndKeepsOthersEven) {
  Pool p(3);
  RoundRobin rr(p.raw);
  p.owned[1]->set_state(ServerState::down);
  EXPECT_EQ(picks(rr, 6), (std::vector<std::uint32_t>{0, 2, 0, 2, 0, 2}));
  p.owned[1]->set_state(ServerState::up);
  p.owned[2]->set_draining(true);
  const auto seq = picks(rr, 6);
  EXPECT_EQ(std::count(seq.begin(), seq.end(), 0u), 3);
  EXPECT_EQ(std::count(seq.begin(), seq.end(), 1u), 3);
}

TEST(RoundRobin, AllUnavailablePicksNothing) {
  Pool p(2);
  RoundRobin rr(p.raw);
  p.owned[0]->set_state(ServerState::ejected);
  p.owned[1]->set_state(ServerState::down);
  EXPECT_FALSE(rr.pick({}));
}

TEST(RoundRobin, TriedServersYieldFallbacksThenNothing) {
  Pool p(3);
  RoundRobin rr(p.raw);
  TriedSet tried;
  PickContext ctx{&tried};
  for (int i = 0; i < 3; ++i) {
    const auto pick = rr.pick(ctx);
    ASSERT_TRUE(pick);
    EXPECT_FALSE(tried.contains(pick.index));
    tried.add(pick.index);
  }
  EXPECT_FALSE(rr.pick(ctx));
}

TEST(TriedSet, IgnoresDuplicatesAndCapsAtCapacity) {
  TriedSet t;
  t.add(3);
  t.add(3);
  EXPECT_EQ(t.size(), 1u);
  for (std::uint32_t i = 0; i < 40; ++i) t.add(i);
  EXPECT_EQ(t.size(), TriedSet::capacity);
}

}  // namespace
}  // namespace sluice
