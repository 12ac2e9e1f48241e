#pragma once
// A retry budget per upstream per snapshot, one slice per worker. Here, in upstream/, because the
// Upstream owns it; proxy/retry decides each retry and spends from it (docs/retries.md).
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>

#include "sluice/config/config.hpp"
#include "sluice/core/clock.hpp"

namespace sluice {

// Retry budget over a time window (Finagle's RetryBudget(ttl, minRetriesPerSec, percentCanRetry),
// as in Tower and Linkerd): every request deposits `budget` tokens, a retry withdraws one, and
// both expire `window` after they were made; a reserve of `min_per_sec` x window tokens is always
// there. So in any window, retries <= budget x requests in that window + min_per_sec x window:
// a burst from one dead server among healthy ones is retried in full, an all-failing fleet sees
// at most (1 + budget) x its client traffic plus the reserve, and after a quiet spell the reserve
// is back (no tokens saved up beyond one window).
//
// Time is cut into `slots` slots of window / slots; the balance counts the current slot and the
// slots - 1 before it, so the window is exact to one slot (10 % of it).
//
// One RetryBudget is one worker's slice: not thread-safe, touched only by its worker (no shared
// write per request). RetryBudgets holds one slice per worker, each with reserve / workers.
class RetryBudget {
public:
  static constexpr unsigned slots = 10;
  RetryBudget() noexcept : RetryBudget(0.2, std::chrono::seconds(10), 10.0) {}
  RetryBudget(double budget, std::chrono::nanoseconds window, double min_per_sec,
              unsigned share = 1) noexcept;

  void begin_request(Clock::time_point now) noexcept;
  // Takes a token for one retry; false when none is left.
  bool try_retry(Clock::time_point now) noexcept;
  // Retries that try_retry would grant now.
  double balance(Clock::time_point now) noexcept;

private:
  void roll(Clock::time_point now) noexcept;

  std::int64_t per_request_ = 0;  // thousandths of a token
  std::int64_t reserve_ = 0;      // thousandths of a token
  std::int64_t slot_width_ = 1;   // nanoseconds
  std::int64_t epoch_ = 0;        // the current slot's number (time / slot width)
  std::int64_t sum_ = 0;          // net of all slots
  std::array<std::int64_t, slots> net_{};  // deposits minus withdrawals, by slot number % slots
};

// One upstream's budget: a slice per worker, each on its own cache line.
class RetryBudgets {
public:
  RetryBudgets(const config::RetryConfig& policy, unsigned workers);
  RetryBudget& slice(unsigned worker) noexcept { return slices_[worker % count_].budget; }

private:
  struct alignas(64) Slice {
    RetryBudget budget;
  };
  unsigned count_;
  std::unique_ptr<Slice[]> slices_;
};

}  // namespace sluice
