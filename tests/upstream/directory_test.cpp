// EndpointDirectory: what a reload and a DNS membership change both go through. Survivors keep
// their Endpoint (and so their state); a server added to a running upstream ramps in.
#include "sluice/upstream/upstream.hpp"

#include <gtest/gtest.h>

namespace sluice {
namespace {

using std::chrono::seconds;

config::UpstreamConfig upstream_of(std::initializer_list<const char*> addresses) {
  config::UpstreamConfig u;
  u.name = "app";
  u.slow_start = seconds(10);
  for (const char* a : addresses) {
    config::ServerConfig s;
    s.address = {"127.0.0.1", static_cast<std::uint16_t>(std::atoi(a))};
    s.name = std::string("app@127.0.0.1:") + a;  // as discovery names them
    u.servers.push_back(s);
  }
  return u;
}

TEST(EndpointDirectory, SurvivorsKeepTheirEndpointAndNewServersRampIn) {
  ManualClock clock;
  EndpointDirectory directory(clock);
  const auto first = directory.obtain(upstream_of({"9001", "9002"}));
  directory.prune();
  // Servers of the first build start together: no ramp.
  EXPECT_EQ(first[0]->state(), ServerState::up);
  first[1]->set_draining(true);

  const auto second = directory.obtain(upstream_of({"9002", "9003"}));
  directory.prune();
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].get(), first[1].get());  // same identity: same object, drain kept
  EXPECT_TRUE(second[0]->draining());
  EXPECT_EQ(second[0]->state(), ServerState::up);
  EXPECT_EQ(second[1]->identity(), "app@127.0.0.1:9003");
  EXPECT_EQ(second[1]->state(), ServerState::slow_start);  // joins a running upstream
  EXPECT_LT(second[1]->weight_share(), Endpoint::full_weight_share);
  clock.advance(seconds(10));
  second[1]->health().tick();
  EXPECT_EQ(second[1]->state(), ServerState::up);

  // A server that went and comes back is a new server (its old state went with it).
  const auto third = directory.obtain(upstream_of({"9001", "9002", "9003"}));
  EXPECT_NE(third[0].get(), first[0].get());
  EXPECT_EQ(third[0]->state(), ServerState::slow_start);
}

}  // namespace
}  // namespace sluice
