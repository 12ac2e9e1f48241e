#include "sluice/balancer/least_conn.hpp"
#include "sluice/balancer/registry.hpp"

#include <algorithm>

#include "sluice/balancer/hash.hpp"
#include "sluice/endpoint/endpoint.hpp"

namespace sluice {

namespace {

struct Load {
  std::int64_t in_flight;
  std::int64_t weight;
};

// The weight is the effective one: configured weight x slow-start share, in thousandths.
Load load_of(const Endpoint& e) noexcept {
  return {std::max<std::int64_t>(0, e.in_flight()),
          std::max<std::int64_t>(1, static_cast<std::int64_t>(e.effective_weight_milli()))};
}

// a.in_flight / a.weight < b.in_flight / b.weight, exactly (in_flight x weight: < 2^63 for any
// in-flight count below 10^12 at the largest weight, 1000 x 1000 thousandths).
bool lighter(const Load& a, const Load& b) noexcept {
  return a.in_flight * b.weight < b.in_flight * a.weight;
}

// Lemire's multiply-shift: x (32 random bits) -> [0, range) without a division.
std::uint32_t below(std::uint32_t x, std::uint32_t range) noexcept {
  return static_cast<std::uint32_t>((std::uint64_t{x} * range) >> 32);
}

// Random bits for two choices, from a per-thread splitmix64 stream: a shared counter would make
// every pick of every worker write one cache line. Seeds differ per thread (and are fixed for
// the first thread, so single-threaded tests are reproducible).
std::uint64_t random_bits() noexcept {
  static std::atomic<std::uint64_t> streams{0};
  thread_local std::uint64_t state = hash_mix64(streams.fetch_add(1, std::memory_order_relaxed));
  state += 0x9e3779b97f4a7c15ull;
  return state;
}

}  // namespace

LeastConn::LeastConn(std::span<Endpoint* const> endpoints, Mode mode, unsigned workers)
    : endpoints_(endpoints),
      two_choices_(endpoints.size() >= 2 &&
                   (mode == Mode::two_choices ||
                    (mode == Mode::automatic && endpoints.size() > two_choices_above))),
      cursor_(two_choices_ ? 1 : workers) {  // two choices has no cursor
  for (unsigned w = 0; w < cursor_.size(); ++w) cursor_[w].store(w, std::memory_order_relaxed);
}

Pick LeastConn::pick(const PickContext& ctx) {
  if (endpoints_.empty()) return {};
  if (two_choices_) return two_choices(ctx, random_bits());
  // Only this worker writes its cursor: a load and a store, no locked instruction.
  auto& cursor = cursor_[ctx.worker];
  const auto turn = cursor.load(std::memory_order_relaxed);
  const auto [best, distance] = scan(ctx, turn);
  // The next scan starts after the server chosen here, as in RoundRobin: otherwise the server
  // after a busy or skipped one would win every tie that starts on that one.
  cursor.store(turn + 1 + distance, std::memory_order_relaxed);
  return best;
}

LeastConn::Scan LeastConn::scan(const PickContext& ctx, std::uint64_t start) const noexcept {
  const auto n = endpoints_.size();
  auto i = static_cast<std::uint32_t>(start % n);
  Scan best;
  Load best_load{};
  for (std::size_t step = 0; step < n; ++step, i = (i + 1 == n) ? 0 : i + 1) {
    const auto& e = *endpoints_[i];
    const auto load = load_of(e);
    // skip() is checked only for a server that would win: most are not lighter, and that test
    // is cheaper than the availability checks.
    if (best.pick && !lighter(load, best_load)) continue;
    if (skip(e, i, ctx)) continue;
    best = {Pick{i}, step};
    best_load = load;
    if (load.in_flight == 0) break;  // nothing is lighter than idle; later ties lose anyway
  }
  return best;
}

Pick LeastConn::two_choices(const PickContext& ctx, std::uint64_t seed) const noexcept {
  const auto n = static_cast<std::uint32_t>(endpoints_.size());
  auto bits = seed;
  for (int attempt = 0; attempt < 4; ++attempt) {
    bits = hash_mix64(bits);
    const auto a = below(static_cast<std::uint32_t>(bits), n);
    auto b = below(static_cast<std::uint32_t>(bits >> 32), n - 1);
    if (b >= a) ++b;  // distinct from a
    const bool use_a = !skip(*endpoints_[a], a, ctx);
    const bool use_b = !skip(*endpoints_[b], b, ctx);
    if (use_a && use_b)
      return Pick{lighter(load_of(*endpoints_[b]), load_of(*endpoints_[a])) ? b : a};
    if (use_a) return Pick{a};
    if (use_b) return Pick{b};
  }
  return scan(ctx, seed).pick;
}

template <>
std::unique_ptr<Balancer> make_policy<config::Balance::least_conn>(std::span<Endpoint* const> endpoints,
                                                                   const BalancerOptions& options) {
  return std::make_unique<LeastConn>(endpoints, LeastConn::Mode::automatic, options.workers);
}

}  // namespace sluice
