#pragma once
// config::Balance -> factory. Each policy's own file defines its factory (make_policy<B>, below);
// the registry's table has one entry per value of config::Balance, filled from those, so adding a
// policy touches its file, its test and its row in config::Balance, nothing else.
//
// Backups are handled here for every policy: when an endpoint is flagged backup, the policy is
// wrapped in BackupAware (see backup.hpp); otherwise the bare policy is returned.
#include <memory>
#include <span>

#include "sluice/balancer/balancer.hpp"
#include "sluice/config/config.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/core/per_worker.hpp"

namespace sluice {

// Policy settings that come from the upstream's config section, beside `balance` itself
// (make_balancer(..., UpstreamConfig) fills them from it).
struct BalancerOptions {
  // hash only: Mirrokni bounded loads, c in ceil(c * (total + 1) / n); 0 = off (e.g. 1.25).
  double hash_balance_factor = 0;
  // round_robin: slow start changes effective weights, so the rotation has to follow them.
  bool slow_start = false;
  // Workers that will pick (server.workers): each gets its own cursor slot (core/per_worker.hpp).
  unsigned workers = default_worker_slots;
  // p2c, least_time: the random streams' seed (tests fix it; make_balancer from a config draws
  // one from std::random_device).
  std::uint64_t seed = 0;
  // least_time: the upstream's `decay`, and the clock its estimates are read on (null: steady).
  Clock::duration decay = std::chrono::seconds(10);
  const Clock* clock = nullptr;
};

// One policy's factory, defined (specialized) in the policy's own file. round_robin honours
// weights as nginx and HAProxy do: with equal weights (and no slow start) it is the plain
// rotation, otherwise the smooth weighted schedule, the same sequence as weighted.
template <config::Balance B>
std::unique_ptr<Balancer> make_policy(std::span<Endpoint* const> endpoints, const BalancerOptions& options);
#define SLUICE_DECLARE_POLICY(name)                                                                  \
  template <>                                                                                      \
  std::unique_ptr<Balancer> make_policy<config::Balance::name>(std::span<Endpoint* const> endpoints, \
                                                               const BalancerOptions& options);
SLUICE_BALANCE_POLICIES(SLUICE_DECLARE_POLICY)
#undef SLUICE_DECLARE_POLICY

// `endpoints` must outlive the balancer (both live in the same Upstream). Control thread
// (builds schedules and rings).
std::unique_ptr<Balancer> make_balancer(config::Balance policy, std::span<Endpoint* const> endpoints,
                                        const BalancerOptions& options);
std::unique_ptr<Balancer> make_balancer(config::Balance policy, std::span<Endpoint* const> endpoints,
                                        const config::UpstreamConfig& config,
                                        unsigned workers = default_worker_slots);

}  // namespace sluice
