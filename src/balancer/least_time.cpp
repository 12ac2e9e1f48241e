// `balance = "least_time"`: power of two choices over time to first byte x (in flight + 1)
// (balancer/two_choices.hpp; the estimate is endpoint/peak_ewma.hpp's, with `decay`).
#include "sluice/balancer/registry.hpp"
#include "sluice/balancer/two_choices.hpp"

namespace sluice {

template <>
std::unique_ptr<Balancer> make_policy<config::Balance::least_time>(std::span<Endpoint* const> endpoints,
                                                                   const BalancerOptions& options) {
  return std::make_unique<TwoChoices>(endpoints, TwoChoices::Options{.cost = TwoChoices::Cost::first_byte_time,
                                                                     .seed = options.seed,
                                                                     .workers = options.workers,
                                                                     .decay = options.decay,
                                                                     .clock = options.clock});
}

}  // namespace sluice
