#include "sluice/balancer/two_choices.hpp"

#include <algorithm>
#include <array>
#include <optional>

#include "sluice/balancer/hash.hpp"
#include "sluice/core/random.hpp"
#include "sluice/endpoint/endpoint.hpp"

namespace sluice {

namespace {

std::int64_t in_flight_of(const Endpoint& e) noexcept { return std::max<std::int64_t>(0, e.in_flight()); }
std::int64_t weight_of(const Endpoint& e) noexcept {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(e.effective_weight_milli()));
}

// b.in_flight / b.weight < a.in_flight / a.weight, exactly (see least_conn.cpp for the range).
bool lighter(const Endpoint& b, const Endpoint& a) noexcept {
  return in_flight_of(b) * weight_of(a) < in_flight_of(a) * weight_of(b);
}

// Lemire's multiply-shift: 32 random bits -> [0, range) without a division.
std::uint32_t below(std::uint64_t bits, std::uint64_t range) noexcept {
  return static_cast<std::uint32_t>(((bits & 0xffffffffu) * range) >> 32);
}

}  // namespace

struct TwoChoices::Judge {
  const TwoChoices& policy;
  Clock::time_point now;
  std::optional<double> median;

  double cost(const Endpoint& e) {
    if (!median && !e.first_byte_time().estimate(now, policy.options_.decay))
      median = policy.median_estimate(now);
    return policy.time_cost(e, now, median.value_or(0));
  }
  // True when `b` is strictly cheaper than `a`.
  bool cheaper(const Endpoint& b, const Endpoint& a) {
    if (policy.options_.cost == Cost::first_byte_time) {
      const double cb = cost(b), ca = cost(a);
      if (cb != ca) return cb < ca;
    }
    return lighter(b, a);
  }
};

TwoChoices::TwoChoices(std::span<Endpoint* const> endpoints, const Options& options)
    : endpoints_(endpoints), options_(options), random_(options.workers) {
  for (const Endpoint* e : endpoints)
    max_weight_milli_ = std::max<std::uint64_t>(max_weight_milli_, std::uint64_t{e->weight()} * Endpoint::full_weight_share);
  for (unsigned w = 0; w < random_.size(); ++w)
    random_[w].store(hash_mix64(options.seed + w), std::memory_order_relaxed);
}

double TwoChoices::time_cost(const Endpoint& e, Clock::time_point now, double median) const noexcept {
  const double estimate = e.first_byte_time().estimate(now, options_.decay).value_or(median);
  return estimate * static_cast<double>(in_flight_of(e) + 1) * Endpoint::full_weight_share /
         static_cast<double>(weight_of(e));
}

double TwoChoices::median_estimate(Clock::time_point now) const noexcept {
  std::array<double, median_sample> known;
  std::size_t count = 0;
  for (std::size_t i = 0; i < endpoints_.size() && count < known.size(); ++i)
    if (const auto est = endpoints_[i]->first_byte_time().estimate(now, options_.decay)) known[count++] = *est;
  if (count == 0) return 0;
  const auto middle = known.begin() + static_cast<std::ptrdiff_t>(count / 2);
  std::nth_element(known.begin(), middle, known.begin() + static_cast<std::ptrdiff_t>(count));
  return *middle;
}

// A server index with probability proportional to its effective weight.
std::uint32_t TwoChoices::draw(std::uint64_t& state) const noexcept {
  const auto n = endpoints_.size();
  std::uint32_t i = 0;
  for (int t = 0; t < weighted_draw_tries; ++t) {
    const auto bits = splitmix64(state);
    i = below(bits, n);
    if (below(bits >> 32, max_weight_milli_) < endpoints_[i]->effective_weight_milli()) break;
  }
  return i;
}

Pick TwoChoices::pick(const PickContext& ctx) {
  const auto n = static_cast<std::uint32_t>(endpoints_.size());
  if (n == 0) return {};
  Judge judge{*this, options_.clock != nullptr ? options_.clock->now() : steady_clock().now(), {}};
  if (n == 1) return skip(*endpoints_[0], 0, ctx) ? Pick{} : Pick{0};
  // Only this worker writes its stream: a load and a store, no locked instruction.
  auto& stream = random_[ctx.worker];
  auto state = stream.load(std::memory_order_relaxed);
  Pick chosen;
  for (int pair = 0; pair < pairs_before_scan && !chosen; ++pair) {
    const auto a = draw(state);
    auto b = draw(state);
    for (int t = 0; b == a && t < weighted_draw_tries; ++t) b = draw(state);
    if (b == a) b = (a + 1 + below(splitmix64(state), n - 1)) % n;  // distinct from a
    const bool use_a = !skip(*endpoints_[a], a, ctx), use_b = !skip(*endpoints_[b], b, ctx);
    if (use_a && use_b) chosen = Pick{judge.cheaper(*endpoints_[b], *endpoints_[a]) ? b : a};
    else if (use_a || use_b) chosen = Pick{use_a ? a : b};
  }
  stream.store(state, std::memory_order_relaxed);
  return chosen ? chosen : scan(ctx, judge);
}

// Most servers are skipped: the cheapest usable one, in list order.
Pick TwoChoices::scan(const PickContext& ctx, Judge& judge) const noexcept {
  Pick best;
  for (std::uint32_t i = 0; i < endpoints_.size(); ++i) {
    if (skip(*endpoints_[i], i, ctx)) continue;
    if (!best || judge.cheaper(*endpoints_[i], *endpoints_[best.index])) best = Pick{i};
  }
  return best;
}

}  // namespace sluice
