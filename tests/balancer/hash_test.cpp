#include "sluice/balancer/hash.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "test_pool.hpp"

namespace sluice {
namespace {

using balancer_test::counts;
using balancer_test::picks;
using balancer_test::TestPool;
using Seq = std::vector<std::uint32_t>;

constexpr int key_count = 100000;

// 100,000 request keys, as the proxy would hash them (fixed seed).
const std::vector<std::uint64_t>& keys() {
  static const auto k = [] {
    std::mt19937_64 rng(20240601);
    std::vector<std::uint64_t> out;
    for (int i = 0; i < key_count; ++i)
      out.push_back(hash_key_bytes("/objects/" + std::to_string(rng())));
    return out;
  }();
  return k;
}

PickContext keyed(std::uint64_t hash) {
  PickContext ctx;
  ctx.hash = hash;
  ctx.has_hash = true;
  return ctx;
}

// Each key's server by identity, so that mappings of differently ordered lists compare.
std::vector<std::string> mapping(ConsistentHash& h, const TestPool& p) {
  std::vector<std::string> out;
  out.reserve(keys().size());
  for (auto k : keys()) {
    const auto pick = h.pick(keyed(k));
    out.push_back(pick ? p.raw[pick.index]->identity() : "");
  }
  return out;
}

TEST(Hash, KeyHashIsStableAcrossBuildsAndPlatforms) {
  // Pinned: every sluice instance (any build, any platform) must hash a key identically.
  EXPECT_EQ(hash_key_bytes(""), 0x0409638ee2bde459ull);
  EXPECT_EQ(hash_key_bytes("a"), 0x28d2053309d28531ull);
  EXPECT_EQ(hash_key_bytes("10.1.2.3"), 0x27a94ea28fca83b4ull);
  EXPECT_EQ(hash_key_bytes("/a/rather/long/path/with/more/than/48/bytes?x=1&y=2"),
            0x238b98d49acfd3e1ull);
}

TEST(Hash, KeyHashSpreadsSimilarKeys) {
  // Keys of every length up to 64 that differ in one byte: all hashes distinct, and the bits
  // flip about half the time (avalanche).
  std::set<std::uint64_t> seen;
  double flipped = 0;
  int pairs = 0;
  for (std::size_t len = 1; len <= 64; ++len) {
    std::string key(len, 'k');
    const auto base = hash_key_bytes(key);
    seen.insert(base);
    for (std::size_t at = 0; at < len; ++at) {
      auto other = key;
      other[at] = 'j';
      const auto h = hash_key_bytes(other);
      seen.insert(h);
      flipped += std::popcount(base ^ h);
      ++pairs;
    }
  }
  EXPECT_EQ(seen.size(), 64u + static_cast<std::size_t>(pairs));
  EXPECT_NEAR(flipped / pairs, 32.0, 1.0);
}

TEST(Hash, TenServersShareKeysEvenly) {
  TestPool p(10);
  ConsistentHash h(p.span());
  std::vector<int> c(p.size(), 0);
  for (auto k : keys()) ++c[h.pick(keyed(k)).index];
  const double mean = key_count / 10.0;
  EXPECT_LE(*std::max_element(c.begin(), c.end()), 1.15 * mean);
  EXPECT_GE(*std::min_element(c.begin(), c.end()), 0.85 * mean);
}

TEST(Hash, SharesFollowWeights) {
  TestPool p({1, 2, 3, 4});
  ConsistentHash h(p.span());
  std::vector<int> c(p.size(), 0);
  for (auto k : keys()) ++c[h.pick(keyed(k)).index];
  for (std::size_t i = 0; i < p.size(); ++i)
    EXPECT_NEAR(c[i], key_count * (i + 1) / 10.0, 0.1 * key_count * (i + 1) / 10.0) << i;
}

TEST(Hash, RemovingAServerMovesOnlyItsKeysAndAddingItBackRestoresThem) {
  TestPool all(10);
  ConsistentHash before(all.span());
  const auto original = mapping(before, all);

  TestPool without = all.reordered({0, 1, 2, 4, 5, 6, 7, 8, 9});  // s3 removed
  ConsistentHash removed(without.span());
  const auto after = mapping(removed, without);
  int moved = 0;
  for (std::size_t i = 0; i < original.size(); ++i) {
    if (original[i] == after[i]) continue;
    ++moved;
    EXPECT_EQ(original[i], "s3") << "a key of " << original[i] << " moved";
  }
  EXPECT_GT(moved, 0);
  EXPECT_LE(moved, 1.15 * key_count / 10);

  ConsistentHash restored(all.span());
  EXPECT_EQ(mapping(restored, all), original);
}

TEST(Hash, ReorderingTheListMovesNoKey) {
  TestPool p(10);
  ConsistentHash a(p.span());
  TestPool shuffled = p.reordered({7, 2, 9, 0, 5, 3, 8, 1, 6, 4});
  ConsistentHash b(shuffled.span());
  EXPECT_EQ(mapping(a, p), mapping(b, shuffled));
}

TEST(Hash, IndependentBuildsMapIdentically) {
  // Two instances: separate Endpoint objects, same identities.
  TestPool one(10);
  TestPool two(10);
  ConsistentHash a(one.span());
  ConsistentHash b(two.span());
  EXPECT_EQ(mapping(a, one), mapping(b, two));
}

TEST(Hash, UnavailableServerMovesOnlyItsKeys) {
  TestPool p(10);
  ConsistentHash h(p.span());
  const auto original = mapping(h, p);
  p[6].set_state(ServerState::down);
  const auto after = mapping(h, p);
  for (std::size_t i = 0; i < original.size(); ++i) {
    if (original[i] != "s6") EXPECT_EQ(after[i], original[i]);
    else EXPECT_NE(after[i], "s6");
  }
  p[6].set_state(ServerState::up);
  EXPECT_EQ(mapping(h, p), original);
}

TEST(Hash, FallbackIsTheKeysNextCandidate) {
  TestPool p(10);
  ConsistentHash h(p.span());
  for (int k = 0; k < 100; ++k) {
    const auto key = keys()[static_cast<std::size_t>(k)];
    const auto order = h.candidates(key);
    ASSERT_EQ(order.size(), p.size());  // every server, each once
    EXPECT_EQ(std::set<std::uint32_t>(order.begin(), order.end()).size(), p.size());
    EXPECT_EQ(h.pick(keyed(key)).index, order[0]);

    // Chosen server down: the next candidate, every time.
    p[order[0]].set_state(ServerState::down);
    EXPECT_EQ(h.pick(keyed(key)).index, order[1]);
    EXPECT_EQ(h.pick(keyed(key)).index, order[1]);
    // ...and a retry that already tried it: the one after.
    TriedSet tried;
    tried.add(order[1]);
    auto ctx = keyed(key);
    ctx.tried = &tried;
    EXPECT_EQ(h.pick(ctx).index, order[2]);
    p[order[0]].set_state(ServerState::up);
  }
}

TEST(Hash, TriedEveryServerPicksNothing) {
  TestPool p(3);
  ConsistentHash h(p.span());
  TriedSet tried;
  auto ctx = keyed(keys()[0]);
  ctx.tried = &tried;
  for (int i = 0; i < 3; ++i) {
    const auto pick = h.pick(ctx);
    ASSERT_TRUE(pick);
    tried.add(pick.index);
  }
  EXPECT_FALSE(h.pick(ctx));
}

TEST(Hash, SkipsServersAtMaxConns) {
  TestPool p(5);
  ConsistentHash h(p.span());
  const auto key = keys()[1];
  const auto order = h.candidates(key);
  p[order[0]].set_max_conns(1);
  p[order[0]].begin_request();
  EXPECT_EQ(h.pick(keyed(key)).index, order[1]);
  p[order[0]].end_request();
  EXPECT_EQ(h.pick(keyed(key)).index, order[0]);
}

TEST(Hash, WithoutAKeyIsRoundRobin) {
  TestPool p(3);
  ConsistentHash h(p.span());
  EXPECT_EQ(picks(h, 7), (Seq{0, 1, 2, 0, 1, 2, 0}));
}

TEST(Hash, EmptyUpstreamPicksNothing) {
  ConsistentHash h(std::span<Endpoint* const>{});
  EXPECT_FALSE(h.pick(keyed(1)));
  EXPECT_FALSE(h.pick({}));
  EXPECT_TRUE(h.candidates(1).empty());
}

TEST(Hash, LargePoolStaysBalancedAndBounded) {
  TestPool p(1000);
  ConsistentHash h(p.span());
  EXPECT_LE(h.ring_size(), ConsistentHash::target_points + p.size());
  std::vector<int> c(p.size(), 0);
  for (auto k : keys()) ++c[h.pick(keyed(k)).index];
  // 65 points a server: a looser band than with 10 servers (bounded loads handle the rest).
  EXPECT_LE(*std::max_element(c.begin(), c.end()), 2.0 * key_count / 1000);
}

TEST(HashBoundedLoads, HotKeySpillsToNextCandidates) {
  TestPool p(10);
  ConsistentHash h(p.span(), 1.25);
  const auto hot = keys()[0];
  const auto order = h.candidates(hot);
  // Every request is the same key and stays in flight.
  for (int i = 1; i <= 1000; ++i) {
    p[h.pick(keyed(hot)).index].begin_request();
    std::int64_t most = 0;
    for (std::size_t s = 0; s < p.size(); ++s) most = std::max(most, p[s].in_flight());
    ASSERT_LE(most, std::ceil(1.25 * i / 10.0)) << "after " << i << " requests";
  }
  // The key's own server is full, and the spill went to its candidates in order.
  EXPECT_EQ(p[order[0]].in_flight(), 125);
  EXPECT_EQ(p[order[1]].in_flight(), 125);
}

TEST(HashBoundedLoads, MixedTrafficNeverPicksAServerOverTheBound) {
  TestPool p(10);
  ConsistentHash h(p.span(), 1.25);
  std::mt19937 rng(7);
  // Half the requests carry one hot key, the others random keys; requests finish at random.
  std::vector<std::uint32_t> open;
  int hot_spilled = 0;
  const auto hot_home = h.candidates(keys()[0])[0];
  for (int i = 0; i < 20000; ++i) {
    const bool hot = rng() % 2 == 0;
    const auto key = hot ? keys()[0] : keys()[rng() % key_count];
    const auto pick = h.pick(keyed(key));
    ASSERT_TRUE(pick);
    if (hot && pick.index != hot_home) ++hot_spilled;
    p[pick.index].begin_request();
    open.push_back(pick.index);
    // The chosen server is within the bound counting this request.
    const auto cap = std::ceil(1.25 * static_cast<double>(open.size()) / 10.0);
    ASSERT_LE(p[pick.index].in_flight(), cap) << "request " << i;
    if (open.size() > 500) {
      const auto at = rng() % open.size();
      p[open[at]].end_request();
      open[at] = open.back();
      open.pop_back();
    }
  }
  EXPECT_GT(hot_spilled, 1000);
}

TEST(HashBoundedLoads, LargePoolUsesRunningTotals) {
  TestPool p(200);  // > exact_totals_limit: totals come from rotating windows
  ConsistentHash h(p.span(), 1.25);
  const auto hot = keys()[0];
  for (int i = 1; i <= 20000; ++i) {
    const auto pick = h.pick(keyed(hot));
    ASSERT_TRUE(pick);
    p[pick.index].begin_request();
    ASSERT_LE(p[pick.index].in_flight(), std::ceil(1.25 * i / 200.0)) << "request " << i;
  }
  // Servers going down are seen within a rotation of the windows.
  for (std::size_t s = 0; s < 100; ++s) p[s].set_state(ServerState::down);
  for (int i = 0; i < 13; ++i) h.pick(keyed(hot));
  const auto pick = h.pick(keyed(hot));
  ASSERT_TRUE(pick);
  EXPECT_GE(pick.index, 100u);
}

// Each worker keeps its own running totals (no cache line written by every worker per pick):
// another worker's requests reach them only when this one re-sums their window, so a total lags
// low under rising load, which makes the bound stricter, never looser.
TEST(HashBoundedLoads, PerWorkerTotalsNeverLoosenTheBound) {
  TestPool p(200);
  ConsistentHash h(p.span(), 1.25, 3);
  const auto hot = keys()[0];
  for (int i = 1; i <= 6000; ++i) {
    auto ctx = keyed(hot);
    ctx.worker = static_cast<unsigned>(i % 3);
    const auto pick = h.pick(ctx);
    ASSERT_TRUE(pick);
    p[pick.index].begin_request();
    ASSERT_LE(p[pick.index].in_flight(), std::ceil(1.25 * i / 200.0)) << "request " << i;
  }
}

TEST(HashBoundedLoads, WithoutLoadTheKeyKeepsItsServer) {
  TestPool p(10);
  ConsistentHash h(p.span(), 1.25);
  for (int k = 0; k < 1000; ++k) {
    const auto key = keys()[static_cast<std::size_t>(k)];
    EXPECT_EQ(h.pick(keyed(key)).index, h.candidates(key)[0]);
  }
}

TEST(HashConcurrency, ThreadsPickTheSameServersForTheSameKeys) {
  TestPool p(10);
  ConsistentHash h(p.span(), 1.25);
  const auto hits = balancer_test::pick_concurrently(
      h, p, 2, 20000, [](int, int i) { return keyed(keys()[static_cast<std::size_t>(i)]); });
  EXPECT_EQ(hits.back(), 0);
  long total = 0;
  for (std::size_t i = 0; i < p.size(); ++i) total += hits[i];
  EXPECT_EQ(total, 40000);

  ConsistentHash plain(p.span());
  const auto hits2 = balancer_test::pick_concurrently(
      plain, p, 2, 20000, [](int, int i) { return keyed(keys()[static_cast<std::size_t>(i)]); });
  // Without bounded loads both threads send the same keys to the same servers: even counts.
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_EQ(hits2[i] % 2, 0);
}

}  // namespace
}  // namespace sluice
