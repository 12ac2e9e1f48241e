#pragma once
// Least connections: the server with the fewest requests in flight per unit of weight, i.e. the
// smallest in_flight / weight, compared without division (a.in_flight * b.weight <
// b.in_flight * a.weight). in_flight is the endpoint's global atomic, so all workers see one
// count. The weight is the effective one (Endpoint::effective_weight_milli(): the configured
// weight times the slow-start share), so a server ramping up after recovery gets proportionally
// fewer requests. Ties go to the first server met from the worker's rotating cursor, which then
// moves past the chosen server (as in RoundRobin), so an idle pool, or any tie, is spread round
// robin by each worker.
//
// Up to `two_choices_above` (32) servers every pick scans them all; a scan reads each server's
// in_flight and weight, checks skip() only for a server that would become the best, and stops
// early at an idle server. Above 32, the pick samples two distinct servers at random and keeps
// the lighter (power of two choices, Mitzenmacher): O(1) instead of O(n). Measured on this
// 2-core machine (bench/results/balancers.md, CPU time): a scan of busy servers costs ~2 ns a
// server (~70 ns at 32, ~110 ns at 64, 170-230 ns at 100, 1.6-1.9 us at 1,000), two choices
// 26-32 ns at any size. The price is accuracy: in a simulation with 20 requests in flight per
// server on average, the spread between the busiest and the idlest server stayed at 2 with the
// scan and reached 12 (100 servers) and 15 (1,000) with two choices. If four pairs in a row are
// skipped (most servers down or full), the pick falls back to the scan.
//
// Threading: pick() from any thread, concurrently; lock-free. A scan stores the calling worker's
// own cursor (PerWorker: no cache line written by every worker); two choices draws from a
// per-thread random stream and writes nothing shared. Both read the endpoints' atomics (relaxed):
// in_flight stays one global count per server, since the policy must compare every worker's load
// (the forwarder's begin/end of each attempt is the one shared write per request it needs).
#include <atomic>
#include <cstdint>

#include "sluice/balancer/balancer.hpp"
#include "sluice/core/per_worker.hpp"

namespace sluice {

class LeastConn final : public Balancer {
public:
  enum class Mode { automatic, scan, two_choices };
  static constexpr std::size_t two_choices_above = 32;

  explicit LeastConn(std::span<Endpoint* const> endpoints, Mode mode = Mode::automatic,
                     unsigned workers = default_worker_slots);
  Pick pick(const PickContext& ctx) override;

private:
  struct Scan {
    Pick pick;
    std::size_t distance = 0;  // from the scan's start to the chosen server
  };
  Scan scan(const PickContext& ctx, std::uint64_t start) const noexcept;
  Pick two_choices(const PickContext& ctx, std::uint64_t seed) const noexcept;

  std::span<Endpoint* const> endpoints_;
  bool two_choices_ = false;
  PerWorker<std::atomic<std::uint64_t>> cursor_;  // where the worker's next scan starts
};

}  // namespace sluice
