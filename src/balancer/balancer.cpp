#include "sluice/balancer/balancer.hpp"

#include "sluice/endpoint/endpoint.hpp"

namespace sluice {

bool skip(const Endpoint& endpoint, std::uint32_t index, const PickContext& ctx) noexcept {
  if (ctx.tried != nullptr && ctx.tried->contains(index)) return true;
  if (endpoint.at_limit() || endpoint.draining()) return true;
  return !ctx.panic && !endpoint.available();
}

}  // namespace sluice
