#pragma once
// Policy name -> factory, one per name in config::balance_policies (what the loader accepts).
//
// Backups are handled here for every policy: when an endpoint is flagged backup, the policy is
// wrapped in BackupAware (see backup.hpp); otherwise the bare policy is returned.
#include <memory>
#include <span>
#include <string_view>

#include "sluice/balancer/balancer.hpp"
#include "sluice/core/per_worker.hpp"

namespace sluice {

namespace config { struct UpstreamConfig; }

// Policy settings that come from the upstream's config section, beside `balance` itself
// (make_balancer(..., UpstreamConfig) fills them from it).
struct BalancerOptions {
  // hash only: Mirrokni bounded loads, c in ceil(c * (total + 1) / n); 0 = off (e.g. 1.25).
  double hash_balance_factor = 0;
  // round_robin: slow start changes effective weights, so the rotation has to follow them.
  bool slow_start = false;
  // Workers that will pick (server.workers): each gets its own cursor slot (core/per_worker.hpp).
  unsigned workers = default_worker_slots;
};

// "round_robin", "weighted", "least_conn", "hash". round_robin honours weights as nginx and
// HAProxy do: with equal weights (and no slow start) it is the plain rotation, otherwise it is
// the smooth weighted schedule, the same sequence as "weighted".
std::span<const std::string_view> policy_names();

// `endpoints` must outlive the balancer (both live in the same Upstream). nullptr for an unknown
// policy name. Control thread (builds schedules and rings).
std::unique_ptr<Balancer> make_balancer(std::string_view policy,
                                        std::span<Endpoint* const> endpoints,
                                        const BalancerOptions& options);
std::unique_ptr<Balancer> make_balancer(std::string_view policy,
                                        std::span<Endpoint* const> endpoints,
                                        const config::UpstreamConfig& config,
                                        unsigned workers = default_worker_slots);

}  // namespace sluice
