#include "sluice/balancer/round_robin.hpp"

#include "sluice/endpoint/endpoint.hpp"

namespace sluice {

Pick RoundRobin::pick(const PickContext& ctx) {
  const auto n = endpoints_.size();
  if (n == 0) return {};
  const bool retry = is_retry(ctx);
  const auto start = retry ? cursor_.load(std::memory_order_relaxed)
                           : cursor_.fetch_add(1, std::memory_order_relaxed);
  for (std::size_t step = 0; step < n; ++step) {
    const auto i = static_cast<std::uint32_t>((start + step) % n);
    if (!skip(*endpoints_[i], i, ctx)) {
      // Advance past a skipped run so that the next request starts after the one chosen here.
      if (step != 0 && !retry) cursor_.fetch_add(step, std::memory_order_relaxed);
      return Pick{i};
    }
  }
  return {};
}

}  // namespace sluice
