#pragma once
// Power of two choices (Mitzenmacher; HAProxy's `random`, Finagle's and Linkerd's P2C): a pick
// draws two distinct servers at random, each with probability proportional to its effective
// weight (configured weight x slow-start share), and takes the cheaper one. Two policies share
// the mechanism and differ in the cost:
//   p2c         in_flight / weight, as least_conn compares;
//   least_time  ewma x (in_flight + 1) / weight, ewma being the server's peak EWMA of time to the
//               first response byte (endpoint/peak_ewma.hpp, fed by the forwarder). A server with
//               no current estimate (new, or no sample within `decay`) costs the upstream's median
//               estimate, so that it gets tried rather than flooded or starved. Equal costs (no
//               estimate anywhere yet) fall back to p2c's comparison.
// A tie goes to the first draw: idle servers share the traffic in proportion to their weights.
//
// Weighted draws are rejection sampling: a uniform index is kept with probability
// effective weight / the largest possible one (read at construction), up to 16 tries (the last
// index drawn is kept after that: weights 1 and 1000 on one upstream then favour the light one
// a little). Skipped servers (tried, down, draining, at max_conns) are redrawn, four pairs at
// most, then a scan of every server takes the cheapest usable one.
//
// Randomness: one splitmix64 stream per worker (PerWorker: no shared write), seeded from
// `seed` and the worker index, so a test with a seed gets an exact sequence.
//
// Threading: pick() from any thread, concurrently; lock-free; writes only the worker's stream.
#include <atomic>
#include <cstdint>

#include "sluice/balancer/balancer.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/core/per_worker.hpp"

namespace sluice {

class TwoChoices final : public Balancer {
public:
  enum class Cost { in_flight, first_byte_time };
  struct Options {
    Cost cost = Cost::in_flight;
    std::uint64_t seed = 0;
    unsigned workers = default_worker_slots;
    Clock::duration decay = std::chrono::seconds(10);  // first_byte_time: an estimate's life
    const Clock* clock = nullptr;                      // first_byte_time; null = steady_clock()
  };
  static constexpr int weighted_draw_tries = 16;
  static constexpr int pairs_before_scan = 4;
  static constexpr std::size_t median_sample = 64;  // servers whose estimates give the median

  TwoChoices(std::span<Endpoint* const> endpoints, const Options& options);
  Pick pick(const PickContext& ctx) override;

  // least_time's cost of one server: ewma x (in_flight + 1) / weight, with `median` standing in
  // for a missing estimate (nanoseconds per unit of weight). For tests and diagnostics.
  double time_cost(const Endpoint& e, Clock::time_point now, double median) const noexcept;
  // The median of the current estimates (the first median_sample servers), 0 when none has one.
  double median_estimate(Clock::time_point now) const noexcept;

private:
  struct Judge;  // compares two servers under the policy's cost, lazily computing the median
  std::uint32_t draw(std::uint64_t& state) const noexcept;
  Pick scan(const PickContext& ctx, Judge& judge) const noexcept;

  std::span<Endpoint* const> endpoints_;
  Options options_;
  std::uint64_t max_weight_milli_ = 1;
  PerWorker<std::atomic<std::uint64_t>> random_;  // each worker's splitmix64 state
};

}  // namespace sluice
