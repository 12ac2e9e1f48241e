#pragma once
// Endpoints for balancer tests: owned here, handed to a policy as the span it balances over.
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "sluice/balancer/balancer.hpp"
#include "sluice/endpoint/endpoint.hpp"

namespace sluice::balancer_test {

inline std::shared_ptr<Endpoint> make_endpoint(const std::string& identity, std::uint16_t port,
                                               std::uint32_t weight = 1) {
  return std::make_shared<Endpoint>(
      identity, config::HostPort{"127.0.0.1", port},
      boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port), weight);
}

struct TestPool {
  TestPool() = default;
  // n servers "s0".."s<n-1>", all of `weight`.
  explicit TestPool(int n, std::uint32_t weight = 1) {
    for (int i = 0; i < n; ++i) add("s" + std::to_string(i), weight);
  }
  // Servers "s0".. with these weights.
  explicit TestPool(const std::vector<std::uint32_t>& weights) {
    for (std::size_t i = 0; i < weights.size(); ++i) add("s" + std::to_string(i), weights[i]);
  }
  TestPool(std::initializer_list<std::uint32_t> weights)
      : TestPool(std::vector<std::uint32_t>(weights)) {}
  Endpoint& add(const std::string& identity, std::uint32_t weight = 1) {
    owned.push_back(
        make_endpoint(identity, static_cast<std::uint16_t>(9001 + owned.size()), weight));
    raw.push_back(owned.back().get());
    return *owned.back();
  }
  // The same Endpoint objects in another order.
  TestPool reordered(const std::vector<std::size_t>& order) const {
    TestPool p;
    for (auto i : order) {
      p.owned.push_back(owned[i]);
      p.raw.push_back(owned[i].get());
    }
    return p;
  }
  Endpoint& operator[](std::size_t i) { return *owned[i]; }
  std::span<Endpoint* const> span() const { return raw; }
  std::size_t size() const { return raw.size(); }

  std::vector<std::shared_ptr<Endpoint>> owned;
  std::vector<Endpoint*> raw;
};

inline std::vector<std::uint32_t> picks(Balancer& b, int n, const PickContext& ctx = {}) {
  std::vector<std::uint32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(b.pick(ctx).index);
  return out;
}

inline std::vector<int> counts(const std::vector<std::uint32_t>& seq, std::size_t n) {
  std::vector<int> c(n, 0);
  for (auto i : seq)
    if (i < n) ++c[i];
  return c;
}

// `threads` threads each make `per_thread` picks, bracketing each with begin/end_request as the
// forwarder does; `key` gives a request's PickContext, and thread t picks as worker t (its own
// cursor slot, as each worker thread has). Returns picks per endpoint (npos counted in the extra
// last slot). Run under ThreadSanitizer in the TSan build.
template <class Key>
std::vector<long> pick_concurrently(Balancer& b, TestPool& pool, int threads, int per_thread,
                                    Key key) {
  std::vector<std::atomic<long>> hits(pool.size() + 1);
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < per_thread; ++i) {
        PickContext ctx = key(t, i);
        ctx.worker = static_cast<unsigned>(t);
        const auto p = b.pick(ctx);
        if (!p) {
          hits[pool.size()].fetch_add(1);
          continue;
        }
        hits[p.index].fetch_add(1);
        pool[p.index].begin_request();
        pool[p.index].end_request();
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& w : workers) w.join();
  std::vector<long> out;
  for (auto& h : hits) out.push_back(h.load());
  return out;
}

inline PickContext no_key(int, int) { return {}; }

}  // namespace sluice::balancer_test
