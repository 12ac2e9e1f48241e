#include "sluice/balancer/round_robin.hpp"
#include "sluice/balancer/registry.hpp"

#include <algorithm>

#include "sluice/balancer/weighted.hpp"
#include "sluice/endpoint/endpoint.hpp"

namespace sluice {

RoundRobin::RoundRobin(std::span<Endpoint* const> endpoints, unsigned workers)
    : endpoints_(endpoints), cursor_(workers) {
  for (unsigned w = 0; w < cursor_.size(); ++w) cursor_[w].store(w, std::memory_order_relaxed);
}

Pick RoundRobin::pick(const PickContext& ctx) {
  const auto n = endpoints_.size();
  if (n == 0) return {};
  const bool retry = is_retry(ctx);
  // Only this worker writes its cursor: a load and a store, no locked instruction.
  auto& cursor = cursor_[ctx.worker];
  const auto start = cursor.load(std::memory_order_relaxed);
  for (std::size_t step = 0; step < n; ++step) {
    const auto i = static_cast<std::uint32_t>((start + step) % n);
    if (!skip(*endpoints_[i], i, ctx)) {
      // The next request starts after the one chosen here, past a skipped run.
      if (!retry) cursor.store(start + step + 1, std::memory_order_relaxed);
      return Pick{i};
    }
  }
  if (!retry) cursor.store(start + 1, std::memory_order_relaxed);
  return {};
}

// With equal weights and no slow start the plain rotation; otherwise the weighted schedule.
template <>
std::unique_ptr<Balancer> make_policy<config::Balance::round_robin>(std::span<Endpoint* const> endpoints,
                                                                   const BalancerOptions& options) {
  const bool equal = std::all_of(endpoints.begin(), endpoints.end(),
                                 [&](const Endpoint* e) { return e->weight() == endpoints.front()->weight(); });
  if (equal && !options.slow_start) return std::make_unique<RoundRobin>(endpoints, options.workers);
  return std::make_unique<WeightedRoundRobin>(endpoints, options.workers);
}

}  // namespace sluice
