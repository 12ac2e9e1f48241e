// `balance = "p2c"`: power of two choices by requests in flight (balancer/two_choices.hpp).
#include "sluice/balancer/registry.hpp"
#include "sluice/balancer/two_choices.hpp"

namespace sluice {

template <>
std::unique_ptr<Balancer> make_policy<config::Balance::p2c>(std::span<Endpoint* const> endpoints,
                                                            const BalancerOptions& options) {
  return std::make_unique<TwoChoices>(
      endpoints, TwoChoices::Options{.cost = TwoChoices::Cost::in_flight, .seed = options.seed, .workers = options.workers});
}

}  // namespace sluice
