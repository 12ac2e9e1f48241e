#include "sluice/upstream/retry_budget.hpp"

#include <algorithm>
#include <cmath>

namespace sluice {

RetryBudget::RetryBudget(double budget, std::chrono::nanoseconds window, double min_per_sec,
                         unsigned share) noexcept
    : per_request_(static_cast<std::int64_t>(std::llround(budget * 1000.0))),
      slot_width_(std::max<std::int64_t>(1, window.count() / slots)) {
  const double seconds = std::chrono::duration<double>(window).count();
  reserve_ = static_cast<std::int64_t>(std::ceil(min_per_sec * seconds * 1000.0 / std::max(1u, share)));
}

// Moves to the slot of `now`, expiring the slots that fell out of the window.
void RetryBudget::roll(Clock::time_point now) noexcept {
  const std::int64_t epoch = now.time_since_epoch().count() / slot_width_;
  if (epoch <= epoch_) return;
  const std::int64_t expired = std::min<std::int64_t>(epoch - epoch_, slots);
  for (std::int64_t i = 1; i <= expired; ++i) {
    auto& slot = net_[static_cast<std::size_t>((epoch_ + i) % slots)];
    sum_ -= slot;
    slot = 0;
  }
  epoch_ = epoch;
}

void RetryBudget::begin_request(Clock::time_point now) noexcept {
  if (per_request_ == 0) return;
  roll(now);
  net_[static_cast<std::size_t>(epoch_ % slots)] += per_request_;
  sum_ += per_request_;
}

bool RetryBudget::try_retry(Clock::time_point now) noexcept {
  roll(now);
  if (reserve_ + sum_ < 1000) return false;
  net_[static_cast<std::size_t>(epoch_ % slots)] -= 1000;
  sum_ -= 1000;
  return true;
}

double RetryBudget::balance(Clock::time_point now) noexcept {
  roll(now);
  return static_cast<double>(reserve_ + sum_) / 1000.0;
}

RetryBudgets::RetryBudgets(const config::RetryConfig& p, unsigned workers)
    : count_(std::max(1u, workers)), slices_(std::make_unique<Slice[]>(count_)) {
  for (unsigned i = 0; i < count_; ++i)
    slices_[i].budget = RetryBudget(p.budget, p.budget_window, p.budget_min_per_sec, count_);
}

}  // namespace sluice
