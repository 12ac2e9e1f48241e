#include "sluice/balancer/registry.hpp"

#include <array>

#include "sluice/balancer/round_robin.hpp"

namespace sluice {

namespace {
constexpr std::array<std::string_view, 1> names{"round_robin"};
}

std::span<const std::string_view> policy_names() { return names; }

std::unique_ptr<Balancer> make_balancer(std::string_view policy, std::span<Endpoint* const> endpoints,
                                        const config::UpstreamConfig&) {
  if (policy == "round_robin") return std::make_unique<RoundRobin>(endpoints);
  return nullptr;
}

}  // namespace sluice
