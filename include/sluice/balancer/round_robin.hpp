#pragma once
// Equal shares in list order, skipping unavailable and already-tried servers. One shared atomic
// cursor: the sequence is exact across all workers (3,000 requests over 3 servers = 1,000 each).
#include <atomic>

#include "sluice/balancer/balancer.hpp"

namespace sluice {

class RoundRobin final : public Balancer {
public:
  explicit RoundRobin(std::span<Endpoint* const> endpoints) : endpoints_(endpoints) {}
  Pick pick(const PickContext& ctx) override;

private:
  std::span<Endpoint* const> endpoints_;
  alignas(64) std::atomic<std::uint64_t> cursor_{0};
};

}  // namespace sluice
