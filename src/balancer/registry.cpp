#include "sluice/balancer/registry.hpp"

#include <array>
#include <random>
#include <utility>

#include "sluice/balancer/backup.hpp"

namespace sluice {

namespace registry_detail {

using Factory = std::unique_ptr<Balancer> (*)(std::span<Endpoint* const>, const BalancerOptions&);

template <std::size_t... I>
constexpr std::array<Factory, sizeof...(I)> factories_of(std::index_sequence<I...>) {
  return {&make_policy<static_cast<config::Balance>(I)>...};
}

// Indexed by config::Balance: one factory per policy the loader accepts.
constexpr auto factories =
    factories_of(std::make_index_sequence<config::Words<config::Balance>::words.size()>());

}  // namespace registry_detail

std::unique_ptr<Balancer> make_balancer(config::Balance policy, std::span<Endpoint* const> endpoints,
                                        const BalancerOptions& options) {
  const auto factory = registry_detail::factories[static_cast<std::size_t>(policy)];
  if (!BackupAware::any_backup(endpoints)) return factory(endpoints, options);
  return std::make_unique<BackupAware>(endpoints,
                                       [&](std::span<Endpoint* const> tier) { return factory(tier, options); });
}

std::unique_ptr<Balancer> make_balancer(config::Balance policy, std::span<Endpoint* const> endpoints,
                                        const config::UpstreamConfig& config, unsigned workers) {
  return make_balancer(policy, endpoints,
                       BalancerOptions{.hash_balance_factor = config.hash_balance_factor,
                                       .slow_start = config.slow_start.count() != 0,
                                       .workers = workers,
                                       .seed = (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}(),
                                       .decay = config.decay});
}

}  // namespace sluice
