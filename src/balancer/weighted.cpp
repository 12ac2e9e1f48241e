#include "sluice/balancer/weighted.hpp"
#include "sluice/balancer/registry.hpp"

#include <algorithm>
#include <numeric>

#include "sluice/endpoint/endpoint.hpp"

namespace sluice {

namespace {

// (p - base) % length with a 32-bit division whenever the distance fits (nearly always): a
// 64-bit divide costs several times more on the hot path.
std::uint32_t slot_of(std::uint64_t position, std::uint64_t base, std::uint32_t length) noexcept {
  const std::uint64_t d = position - base;
  if (d <= UINT32_MAX) return static_cast<std::uint32_t>(d) % length;
  return static_cast<std::uint32_t>(d % length);
}

// The weight the schedule gives a server: its configured weight (1..1000) times its slow-start
// share (thousandths, 1..1000), before the common divisor is taken out.
std::uint32_t schedulable(const Endpoint& e) noexcept {
  return std::clamp<std::uint32_t>(e.weight(), 1, WeightedRoundRobin::max_weight) *
         std::clamp<std::uint32_t>(e.weight_share(), 1, Endpoint::full_weight_share);
}

}  // namespace

WeightedRoundRobin::WeightedRoundRobin(std::span<Endpoint* const> endpoints, unsigned workers)
    : endpoints_(endpoints), cursors_(workers) {
  const auto n = static_cast<std::uint64_t>(endpoints_.size());
  if (n == 0) return;
  // Scaled weights are >= 1 each, so a scaled schedule may exceed its cap by up to n slots.
  const auto capacity = length_cap(n, 1) + n;
  for (auto& s : schedules_) s.slots = std::make_unique<std::atomic<std::uint32_t>[]>(capacity);
  built_weights_ = std::make_unique<std::atomic<std::uint64_t>[]>(n);
  weights_.resize(n);
  order_.reserve(n);
  groups_.reserve(n);
  chunks_ = static_cast<std::uint32_t>((n + weight_check_window - 1) / weight_check_window);
  rebuild();
}

bool WeightedRoundRobin::weights_changed(std::uint64_t position) const noexcept {
  const auto n = endpoints_.size();
  std::size_t first = 0;
  std::size_t last = n;
  if (chunks_ > 1) {
    first = (static_cast<std::uint32_t>(position) % chunks_) * std::size_t{weight_check_window};
    last = std::min(n, first + weight_check_window);
  }
  for (auto i = first; i < last; ++i)
    if (endpoints_[i]->effective_weight_milli() != built_weights_[i].load(std::memory_order_relaxed))
      return true;
  return false;
}

void WeightedRoundRobin::group_by_weight() noexcept {
  const auto n = static_cast<std::uint32_t>(endpoints_.size());
  order_.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) order_[i] = i;
  std::sort(order_.begin(), order_.end(), [&](std::uint32_t a, std::uint32_t b) {
    return weights_[a] != weights_[b] ? weights_[a] < weights_[b] : a < b;
  });
  groups_.clear();
  for (std::uint32_t at = 0; at < n; ++at) {
    if (groups_.empty() || weights_[order_[at]] != groups_.back().weight)
      groups_.push_back({weights_[order_[at]], at, at + 1, at, 0});
    else
      groups_.back().end = at + 1;
  }
}

std::uint64_t WeightedRoundRobin::length_cap(std::uint64_t servers, std::uint64_t groups) noexcept {
  return std::max(servers, std::min({rebuild_budget / groups, std::uint64_t{max_schedule_length},
                                     std::uint64_t{max_weight} * servers}));
}

void WeightedRoundRobin::rebuild() noexcept {
  const auto n = endpoints_.size();
  std::uint32_t divisor = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& e = *endpoints_[i];
    // Recorded first, so that other picks stop asking for a rebuild; a change made while this
    // one runs differs from the recorded value and triggers the next rebuild.
    built_weights_[i].store(e.effective_weight_milli(), std::memory_order_relaxed);
    weights_[i] = schedulable(e);
    divisor = std::gcd(divisor, weights_[i]);
  }
  // Weights in thousandths have a large common divisor unless a server is ramping: 5,1,1 at full
  // share is 5000,1000,1000 and must schedule as 5,1,1 (the same sequence, 1,000 times shorter).
  std::uint64_t total = 0;
  for (auto& w : weights_) {
    w /= divisor;
    total += w;
  }
  group_by_weight();
  const auto limit = length_cap(n, groups_.size());
  if (total > limit) {
    std::uint64_t scaled = 0;
    for (auto& w : weights_) {
      w = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(w * limit / total));
      scaled += w;
    }
    total = scaled;
    group_by_weight();
  }

  // nginx ngx_http_upstream_get_peer(): every peer gains its weight, the largest current weight
  // wins (the first in list order on a tie) and loses the total. After t gains a peer's current
  // weight is t * w - total * picks, so peers of equal weight differ only by their pick counts:
  // within such a group the winner is the first peer (by index) with the fewest picks, i.e. the
  // group takes its turns round robin. One step therefore compares groups, not peers - O(g) for
  // g distinct weights instead of O(n) (g is 1 or 2 in most pools; one step per slot).
  const auto target = active_.load(std::memory_order_relaxed) ^ 1u;
  auto& schedule = schedules_[target];
  const auto sum = static_cast<std::int64_t>(total);
  for (std::int64_t t = 1; t <= sum; ++t) {
    Group* best = nullptr;
    std::int64_t best_current = 0;
    for (auto& g : groups_) {
      const auto current = t * g.weight - sum * g.picks;
      if (best == nullptr || current > best_current ||
          (current == best_current && order_[g.next] < order_[best->next])) {
        best = &g;
        best_current = current;
      }
    }
    schedule.slots[t - 1].store(order_[best->next], std::memory_order_relaxed);
    if (++best->next == best->end) {  // every member had its turn: a round of the group is done
      best->next = best->begin;
      ++best->picks;
    }
  }
  schedule.length.store(static_cast<std::uint32_t>(total), std::memory_order_relaxed);
  schedule.generation.store(++generation_, std::memory_order_relaxed);
  active_.store(target, std::memory_order_release);
}

Pick WeightedRoundRobin::pick(const PickContext& ctx) {
  const auto n = endpoints_.size();
  if (n == 0) return {};
  const bool retry = is_retry(ctx);
  // Only this worker writes its cursor: loads and stores, no locked instruction.
  auto& cursor = cursors_[ctx.worker];
  const auto position = cursor.position.load(std::memory_order_relaxed);
  if (!retry) cursor.position.store(position + 1, std::memory_order_relaxed);

  if (weights_changed(position) && !rebuilding_.load(std::memory_order_relaxed) &&
      !rebuilding_.exchange(true, std::memory_order_acquire)) {
    rebuild();
    rebuilding_.store(false, std::memory_order_release);
  }

  const auto& schedule = schedules_[active_.load(std::memory_order_acquire)];
  const auto length = schedule.length.load(std::memory_order_relaxed);
  auto base = cursor.base.load(std::memory_order_relaxed);
  if (const auto g = schedule.generation.load(std::memory_order_relaxed);
      cursor.generation.load(std::memory_order_relaxed) != g) {
    // A schedule this worker has not walked yet: it starts at its beginning, plus the worker's
    // offset (unsigned wrap-around is fine: only position - base is used).
    base = position - ctx.worker;
    cursor.base.store(base, std::memory_order_relaxed);
    cursor.generation.store(g, std::memory_order_relaxed);
  }
  auto slot = slot_of(position, base, length);
  const auto walk = std::min<std::uint64_t>(length, 4 * std::uint64_t{n} + 64);
  std::uint32_t index = 0;
  for (std::uint64_t step = 0; step < walk; ++step) {
    index = schedule.slots[slot].load(std::memory_order_relaxed);
    if (!skip(*endpoints_[index], index, ctx)) {
      if (step != 0 && !retry) cursor.position.store(position + 1 + step, std::memory_order_relaxed);
      return Pick{index};
    }
    if (++slot == length) slot = 0;
  }
  // Most servers are skipped: any one left will do, in list order after the last one walked.
  for (std::size_t step = 1; step < n; ++step) {
    const auto i = static_cast<std::uint32_t>((index + step) % n);
    if (!skip(*endpoints_[i], i, ctx)) return Pick{i};
  }
  return {};
}

std::vector<std::uint32_t> WeightedRoundRobin::schedule() const {
  std::vector<std::uint32_t> out;
  if (endpoints_.empty()) return out;
  const auto& schedule = schedules_[active_.load(std::memory_order_acquire)];
  const auto length = schedule.length.load(std::memory_order_relaxed);
  out.reserve(length);
  for (std::uint32_t i = 0; i < length; ++i)
    out.push_back(schedule.slots[i].load(std::memory_order_relaxed));
  return out;
}

template <>
std::unique_ptr<Balancer> make_policy<config::Balance::weighted>(std::span<Endpoint* const> endpoints,
                                                                 const BalancerOptions& options) {
  return std::make_unique<WeightedRoundRobin>(endpoints, options.workers);
}

}  // namespace sluice
