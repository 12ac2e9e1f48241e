#pragma once
// Policy name -> factory. The config validator asks policy_names() which `balance` values exist.
#include <memory>
#include <span>
#include <string_view>

#include "sluice/balancer/balancer.hpp"

namespace sluice {

namespace config { struct UpstreamConfig; }

std::span<const std::string_view> policy_names();

// `endpoints` must outlive the balancer (both live in the same Upstream).
std::unique_ptr<Balancer> make_balancer(std::string_view policy, std::span<Endpoint* const> endpoints,
                                        const config::UpstreamConfig& config);

}  // namespace sluice
