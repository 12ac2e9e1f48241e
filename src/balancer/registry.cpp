#include "sluice/balancer/registry.hpp"

#include <algorithm>
#include <array>

#include "sluice/balancer/backup.hpp"
#include "sluice/balancer/hash.hpp"
#include "sluice/balancer/least_conn.hpp"
#include "sluice/balancer/round_robin.hpp"
#include "sluice/balancer/weighted.hpp"
#include "sluice/config/config.hpp"
#include "sluice/endpoint/endpoint.hpp"

namespace sluice {

namespace {

constexpr auto& names = config::balance_policies;

bool equal_weights(std::span<Endpoint* const> endpoints) {
  return std::all_of(endpoints.begin(), endpoints.end(),
                     [&](const Endpoint* e) { return e->weight() == endpoints.front()->weight(); });
}

std::unique_ptr<Balancer> make_policy(std::string_view policy, std::span<Endpoint* const> endpoints,
                                      const BalancerOptions& options) {
  const auto workers = options.workers;
  if (policy == "round_robin" && equal_weights(endpoints) && !options.slow_start)
    return std::make_unique<RoundRobin>(endpoints, workers);
  if (policy == "round_robin" || policy == "weighted")
    return std::make_unique<WeightedRoundRobin>(endpoints, workers);
  if (policy == "least_conn")
    return std::make_unique<LeastConn>(endpoints, LeastConn::Mode::automatic, workers);
  if (policy == "hash")
    return std::make_unique<ConsistentHash>(endpoints, options.hash_balance_factor, workers);
  return nullptr;
}

}  // namespace

std::span<const std::string_view> policy_names() { return names; }

std::unique_ptr<Balancer> make_balancer(std::string_view policy,
                                        std::span<Endpoint* const> endpoints,
                                        const BalancerOptions& options) {
  if (std::find(names.begin(), names.end(), policy) == names.end()) return nullptr;
  if (!BackupAware::any_backup(endpoints)) return make_policy(policy, endpoints, options);
  return std::make_unique<BackupAware>(endpoints, [&](std::span<Endpoint* const> tier) {
    return make_policy(policy, tier, options);
  });
}

std::unique_ptr<Balancer> make_balancer(std::string_view policy,
                                        std::span<Endpoint* const> endpoints,
                                        const config::UpstreamConfig& config,
                                        unsigned workers) {
  return make_balancer(policy, endpoints,
                       BalancerOptions{.hash_balance_factor = config.hash_balance_factor,
                                       .slow_start = config.slow_start.count() != 0,
                                       .workers = workers});
}

}  // namespace sluice
