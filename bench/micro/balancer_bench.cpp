// Balancer::pick() cost for every policy at 3, 100 and 1,000 servers, on one thread and on two
// threads sharing one balancer (as workers do, each thread picking as its own worker index).
// Results: bench/results/balancers.md.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "sluice/balancer/hash.hpp"
#include "sluice/balancer/least_conn.hpp"
#include "sluice/balancer/registry.hpp"
#include "sluice/balancer/weighted.hpp"
#include "sluice/endpoint/endpoint.hpp"

namespace {

using namespace sluice;

// A pool with mixed weights (1..10) and in-flight counts (1..20: no server is idle, so a
// least_conn scan cannot stop early), fixed seed, and the balancer under test. Built once per
// (policy, size) and shared by the benchmark's threads.
struct Fixture {
  std::vector<std::shared_ptr<Endpoint>> owned;
  std::vector<Endpoint*> raw;
  std::unique_ptr<Balancer> balancer;
};

enum class Variant { plain, scan, two_choices, bounded };

Fixture& fixture(const std::string& policy, std::size_t n, Variant variant) {
  static std::mutex mutex;
  static std::map<std::tuple<std::string, std::size_t, Variant>, std::unique_ptr<Fixture>> all;
  std::lock_guard lock(mutex);
  auto& f = all[{policy, n, variant}];
  if (f) return *f;
  f = std::make_unique<Fixture>();
  std::mt19937 rng(1);
  for (std::size_t i = 0; i < n; ++i) {
    const auto port = static_cast<std::uint16_t>(10000 + i);
    f->owned.push_back(std::make_shared<Endpoint>(
        "backend-" + std::to_string(i), config::HostPort{"10.0.0.1", port},
        boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("10.0.0.1"), port),
        1 + rng() % 10));
    for (auto k = 1 + rng() % 20; k > 0; --k) f->owned.back()->begin_request();
    f->raw.push_back(f->owned.back().get());
  }
  switch (variant) {
    case Variant::plain:
      f->balancer = make_balancer(*config::from_name<config::Balance>(policy), f->raw, BalancerOptions{});
      break;
    case Variant::scan:
      f->balancer = std::make_unique<LeastConn>(f->raw, LeastConn::Mode::scan);
      break;
    case Variant::two_choices:
      f->balancer = std::make_unique<LeastConn>(f->raw, LeastConn::Mode::two_choices);
      break;
    case Variant::bounded:
      f->balancer = make_balancer(*config::from_name<config::Balance>(policy), f->raw, BalancerOptions{.hash_balance_factor = 1.25});
      break;
  }
  return *f;
}

// Request keys as the proxy would hash them.
const std::vector<std::uint64_t>& key_hashes() {
  static const auto keys = [] {
    std::vector<std::uint64_t> out;
    for (int i = 0; i < 4096; ++i)
      out.push_back(hash_key_bytes("/api/items/" + std::to_string(i * 7919)));
    return out;
  }();
  return keys;
}

void run(benchmark::State& state, const std::string& policy, Variant variant) {
  auto& f = fixture(policy, static_cast<std::size_t>(state.range(0)), variant);
  const auto& keys = key_hashes();
  const bool keyed = policy == "hash";
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * 1031;
  for (auto _ : state) {
    PickContext ctx;
    ctx.worker = static_cast<unsigned>(state.thread_index());  // each thread is a worker
    if (keyed) {
      ctx.hash = keys[i++ & 4095];
      ctx.has_hash = true;
    }
    benchmark::DoNotOptimize(f.balancer->pick(ctx));
  }
}

void BM_RoundRobin(benchmark::State& s) { run(s, "round_robin", Variant::plain); }
void BM_Weighted(benchmark::State& s) { run(s, "weighted", Variant::plain); }
void BM_LeastConn(benchmark::State& s) { run(s, "least_conn", Variant::plain); }
void BM_LeastConnScan(benchmark::State& s) { run(s, "least_conn", Variant::scan); }
void BM_LeastConnTwoChoices(benchmark::State& s) { run(s, "least_conn", Variant::two_choices); }
void BM_Hash(benchmark::State& s) { run(s, "hash", Variant::plain); }
void BM_HashBoundedLoads(benchmark::State& s) { run(s, "hash", Variant::bounded); }

#define SLUICE_SIZES(bm) \
  BENCHMARK(bm)->Arg(3)->Arg(100)->Arg(1000)->Threads(1)->Threads(2)->UseRealTime()

SLUICE_SIZES(BM_RoundRobin);
SLUICE_SIZES(BM_Weighted);
SLUICE_SIZES(BM_LeastConn);
SLUICE_SIZES(BM_LeastConnScan);
// Where the scan stops paying: LeastConn::two_choices_above.
BENCHMARK(BM_LeastConnScan)->Arg(16)->Arg(32)->Arg(64)->UseRealTime();
SLUICE_SIZES(BM_LeastConnTwoChoices);
SLUICE_SIZES(BM_Hash);
SLUICE_SIZES(BM_HashBoundedLoads);

// A schedule rebuild after a weight change, at its worst: random weights 1..1000, nearly all
// different (100 servers: ~95 groups, so a ~22,000-slot schedule). Measured as a construction.
void BM_WeightedRebuild(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<std::shared_ptr<Endpoint>> owned;
  std::vector<Endpoint*> raw;
  std::mt19937 rng(2);
  for (std::size_t i = 0; i < n; ++i) {
    const auto port = static_cast<std::uint16_t>(20000 + i);
    owned.push_back(std::make_shared<Endpoint>(
        "backend-" + std::to_string(i), config::HostPort{"10.0.0.1", port},
        boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("10.0.0.1"), port),
        1 + rng() % 1000));
    raw.push_back(owned.back().get());
  }
  for (auto _ : state) {
    WeightedRoundRobin w(raw);
    benchmark::DoNotOptimize(&w);
  }
}
BENCHMARK(BM_WeightedRebuild)->Arg(3)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

void BM_HashKeyBytes(benchmark::State& state) {
  const std::string key(static_cast<std::size_t>(state.range(0)), 'k');
  for (auto _ : state) benchmark::DoNotOptimize(hash_key_bytes(key));
}
BENCHMARK(BM_HashKeyBytes)->Arg(12)->Arg(40)->Arg(100);

}  // namespace
