#pragma once
// Smooth weighted round robin (nginx's algorithm: weights 5,1,1 give a a b a c a a), lock-free.
//
// nginx mutates every peer's current_weight on every pick, which needs a lock when all workers
// share one balancer. Instead, the whole SWRR sequence for the current weight vector is computed
// once into a schedule of sum(weights) slots, shared read-only, and each worker walks it with
// its own cursor (PerWorker: no cache line written by every worker on every request): the
// worker's position p takes slot (p - base) % length, base being where that worker met this
// schedule. So
//   - each worker's sequence is exactly nginx's (worker w starts w slots in, so that workers do
//     not all begin on the heaviest server);
//   - every `length` consecutive picks of one worker hold exactly each server's weight, so with
//     W workers a server's total is within W slots of its exact share (exact when every worker
//     made whole cycles), whatever the interleaving.
//
// Weights: the effective weight of each server, i.e. its configured weight (1..1000) times its
// slow-start share (Endpoint::weight_share(), in thousandths), with the common divisor taken out:
// weights 5,1,1 at full share schedule as 5,1,1, and with the first server at half share as
// 5,2,2. Both change at runtime (reload, slow-start ramp) and are detected lazily by the picks
// themselves: each pick compares up to `weight_check_window` endpoints' effective weights with
// those the schedule was built from, rotating through the list, so a change is seen within
// ceil(n / 8) picks of a worker (at once for n <= 8). The pick that sees it takes a try-lock
// flag (nobody waits on it: the others keep using the current schedule), rebuilds into the
// inactive one of two preallocated buffers and publishes it, with a new generation number, by a
// release store of `active_`; each worker starts the new schedule from its beginning (plus its
// offset) at its first pick that sees the new generation. There is nothing to reclaim: both
// buffers live as long as the balancer,
// and every slot is an atomic holding a valid index (< n), so a slow reader that overlaps a
// second rebuild of its buffer gets a valid, if momentarily unordered, choice and never a data
// race.
//
// Size: the schedule is sum(weights) slots, capped so that a rebuild stays cheap and the buffers
// small. A rebuild is O(length x g) for g distinct weights: servers of one weight take their
// turns round robin, so each slot compares groups, not servers. The cap is
// max(n, min(2^21 / g, 65,536, 1,000 x n)): 65,536 slots for the usual pools with a few distinct
// weights, less when nearly every weight differs (100 different weights: 20,971). Above the cap,
// weights are scaled down to fit (each server keeps >= 1 slot) and the proportions are exact for
// the scaled weights (each server within one slot of its true share). Measured (bench/results/balancers.md):
// microseconds for the usual pools, ~3 ms at worst. It runs on the worker whose pick noticed the
// change, once per change (a slow-start ramp changes the share at most every 1 % of the ramp).
//
// Skipping (tried, unavailable, at max_conns) walks forward in the schedule and advances the
// worker's cursor past the walked slots (as RoundRobin does), so the skipped server's turns go to
// the others in schedule order. The walk is bounded (4n + 64 slots); past it a plain list scan
// finds any remaining server.
//
// Threading: pick() from any thread, concurrently; the constructor on the control thread.
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "sluice/balancer/balancer.hpp"
#include "sluice/core/per_worker.hpp"

namespace sluice {

class WeightedRoundRobin final : public Balancer {
public:
  static constexpr std::uint32_t max_weight = 1000;
  static constexpr std::uint32_t max_schedule_length = 65536;
  static constexpr std::uint64_t rebuild_budget = std::uint64_t{1} << 21;  // length x groups
  static constexpr std::uint32_t weight_check_window = 8;

  explicit WeightedRoundRobin(std::span<Endpoint* const> endpoints,
                              unsigned workers = default_worker_slots);
  Pick pick(const PickContext& ctx) override;

  // The schedule in use, as endpoint indices (tests, diagnostics; allocates).
  std::vector<std::uint32_t> schedule() const;

private:
  struct Schedule {
    std::atomic<std::uint64_t> generation{0};  // 1 for the first schedule, +1 per rebuild
    std::atomic<std::uint32_t> length{0};
    std::unique_ptr<std::atomic<std::uint32_t>[]> slots;
  };
  // One worker's walk through the schedule; written by that worker only.
  struct Cursor {
    std::atomic<std::uint64_t> position{0};
    std::atomic<std::uint64_t> base{0};        // the position that maps to slot 0
    std::atomic<std::uint64_t> generation{0};  // of the schedule `base` belongs to
  };

  bool weights_changed(std::uint64_t position) const noexcept;
  // Requires rebuilding_ held (or the constructor).
  void rebuild() noexcept;
  void group_by_weight() noexcept;  // weights_ -> order_, groups_
  static std::uint64_t length_cap(std::uint64_t servers, std::uint64_t groups) noexcept;

  std::span<Endpoint* const> endpoints_;
  std::uint32_t chunks_ = 1;  // ceil(n / weight_check_window)
  std::array<Schedule, 2> schedules_;
  // effective_weight_milli() of each server when the schedule was built.
  std::unique_ptr<std::atomic<std::uint64_t>[]> built_weights_;
  // Builder scratch, preallocated; touched only by the holder of rebuilding_.
  struct Group {  // servers of one weight, [begin, end) in order_
    std::int64_t weight;
    std::uint32_t begin, end, next;
    std::int64_t picks;  // full rounds of the group so far
  };
  std::vector<std::uint32_t> weights_;
  std::vector<std::uint32_t> order_;  // server indices by (weight, index)
  std::vector<Group> groups_;
  std::uint64_t generation_ = 0;  // of the last schedule built; touched by the builder only
  // Read by every pick, written once per rebuild.
  alignas(64) std::atomic<std::uint32_t> active_{0};
  std::atomic<bool> rebuilding_{false};
  PerWorker<Cursor> cursors_;
};

}  // namespace sluice
