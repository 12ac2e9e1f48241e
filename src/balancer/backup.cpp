#include "sluice/balancer/backup.hpp"

#include <algorithm>

#include "sluice/endpoint/endpoint.hpp"

namespace sluice {

BackupAware::BackupAware(std::span<Endpoint* const> endpoints, const Factory& make_policy) {
  tier_index_.reserve(endpoints.size());
  for (std::uint32_t i = 0; i < endpoints.size(); ++i) {
    auto& tier = endpoints[i]->backup() ? backup_ : primary_;
    tier_index_.push_back(static_cast<std::uint32_t>(tier.endpoints.size()));
    tier.endpoints.push_back(endpoints[i]);
    tier.upstream_index.push_back(i);
  }
  // The tiers' vectors are complete: the policies may now hold spans over them.
  for (auto* tier : {&primary_, &backup_})
    if (!tier->endpoints.empty()) tier->balancer = make_policy(tier->endpoints);
}

bool BackupAware::any_backup(std::span<Endpoint* const> endpoints) noexcept {
  return std::any_of(endpoints.begin(), endpoints.end(),
                     [](const Endpoint* e) { return e->backup(); });
}

Pick BackupAware::pick(const PickContext& ctx) {
  if (const auto p = pick_in(primary_, ctx)) return p;
  return pick_in(backup_, ctx);
}

Pick BackupAware::pick_in(const Tier& tier, const PickContext& ctx) const {
  if (!tier.balancer) return {};
  TriedSet tried;
  PickContext local = ctx;
  if (ctx.tried != nullptr) {
    for (const auto u : ctx.tried->items()) {
      // Keep only this tier's servers, renumbered.
      if (u >= tier_index_.size()) continue;
      const auto t = tier_index_[u];
      if (t < tier.upstream_index.size() && tier.upstream_index[t] == u) tried.add(t);
    }
    local.tried = &tried;
  }
  const auto p = tier.balancer->pick(local);
  return p ? Pick{tier.upstream_index[p.index]} : Pick{};
}

}  // namespace sluice
