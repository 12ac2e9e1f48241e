#include "sluice/endpoint/endpoint.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace sluice {
namespace {

namespace ip = boost::asio::ip;

Endpoint make(std::string identity = "app-1", std::string host = "127.0.0.1", std::uint16_t port = 9001) {
  return Endpoint(std::move(identity), config::HostPort{host, port},
                  ip::tcp::endpoint(ip::make_address("127.0.0.1"), port), 3);
}

TEST(Endpoint, IdsAreProcessUniqueAndIdentityAndAddressAreKept) {
  auto a = make("app-1", "127.0.0.1", 9001);
  auto b = make("app-1", "::1", 9001);  // the same identity: still a new id
  EXPECT_NE(a.id(), b.id());
  EXPECT_EQ(a.identity(), "app-1");
  EXPECT_EQ(a.address_text(), "127.0.0.1:9001");
  EXPECT_EQ(b.address_text(), "[::1]:9001");
  EXPECT_EQ(a.socket_address().port(), 9001);
  EXPECT_EQ(a.weight(), 3u);
  EXPECT_FALSE(a.has_health());
}

TEST(Endpoint, AvailableOnlyUpOrRampingAndNotDraining) {
  auto e = make();
  const struct {
    ServerState state;
    bool draining;
    bool available;
  } cases[] = {
      {ServerState::up, false, true},         {ServerState::slow_start, false, true},
      {ServerState::down, false, false},      {ServerState::ejected, false, false},
      {ServerState::up, true, false},         {ServerState::slow_start, true, false},
  };
  for (const auto& c : cases) {
    e.set_state(c.state);
    e.set_draining(c.draining);
    EXPECT_EQ(e.available(), c.available) << to_string(c.state) << " draining " << c.draining;
  }
  EXPECT_STREQ(to_string(ServerState::slow_start), "slow_start");
  EXPECT_STREQ(to_string(ServerState::ejected), "ejected");
}

TEST(Endpoint, EffectiveWeightIsTheWeightTimesItsRampShare) {
  auto e = make();
  EXPECT_EQ(e.effective_weight_milli(), 3000u);
  e.set_weight_share(250);
  EXPECT_EQ(e.effective_weight_milli(), 750u);
  e.set_weight(4);
  EXPECT_EQ(e.effective_weight_milli(), 1000u);
}

TEST(Endpoint, MaxConnsIsNeverExceededByConcurrentTakers) {
  auto e = make();
  e.set_max_conns(5);
  std::atomic<int> taken{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i)
        if (e.try_begin_request()) taken.fetch_add(1);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(taken.load(), 5);
  EXPECT_EQ(e.in_flight(), 5);
  EXPECT_TRUE(e.at_limit());
  e.end_request();
  EXPECT_FALSE(e.at_limit());
  EXPECT_TRUE(e.try_begin_request());
  EXPECT_FALSE(e.try_begin_request());
}

TEST(Endpoint, NoMaxConnsMeansNoLimit) {
  auto e = make();
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(e.try_begin_request());
  EXPECT_EQ(e.in_flight(), 100);
  EXPECT_FALSE(e.at_limit());
  for (int i = 0; i < 100; ++i) e.end_request();
  EXPECT_EQ(e.in_flight(), 0);
}

TEST(Endpoint, ExchangesFallInTheirDurationBucketAndStatusClass) {
  auto e = make();
  auto& c = e.counters(2);
  c.count_exchange(2, std::chrono::microseconds(1000));     // 2xx, exactly 1 ms: first bucket
  c.count_exchange(2, std::chrono::microseconds(1001));     // just over: second
  c.count_exchange(5, std::chrono::microseconds(70'000'000));  // 5xx, over 60 s: the overflow bucket
  EXPECT_EQ(c.responses[2].load(), 2u);
  EXPECT_EQ(c.responses[5].load(), 1u);
  EXPECT_EQ(c.duration_counts[0].load(), 1u);
  EXPECT_EQ(c.duration_counts[1].load(), 1u);
  EXPECT_EQ(c.duration_counts[EndpointCounters::buckets].load(), 1u);
  EXPECT_EQ(c.duration_sum_us.load(), 70'002'001u);
  // Each worker has its own slots; slot numbers wrap at max_worker_slots.
  EXPECT_EQ(e.counters(3).responses[2].load(), 0u);
  EXPECT_EQ(&e.counters(2 + Endpoint::max_worker_slots), &c);
}

}  // namespace
}  // namespace sluice
