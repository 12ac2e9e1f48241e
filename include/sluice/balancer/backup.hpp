#pragma once
// Backup servers, for any policy: the upstream's endpoints are split (in list order) into
// primaries and backups, each tier gets its own instance of the policy, and a pick asks the
// primary tier first and the backup tier only when the primaries yield nothing - all of them
// unavailable, at max_conns, or already tried by this request (so a retry after every primary
// failed goes to a backup). Each tier balances only among its own servers, so backups get no
// share while any primary can serve, and are balanced by the same policy once they take over.
// Indices are translated between the upstream's list and each tier's list, `tried` included.
//
// Built by make_balancer() only when some endpoint is flagged backup; the flag is read then.
// Threading: pick() from any thread, concurrently (the tiers' policies are lock-free).
#include <functional>
#include <memory>
#include <vector>

#include "sluice/balancer/balancer.hpp"

namespace sluice {

class BackupAware final : public Balancer {
public:
  using Factory = std::function<std::unique_ptr<Balancer>(std::span<Endpoint* const>)>;

  BackupAware(std::span<Endpoint* const> endpoints, const Factory& make_policy);
  Pick pick(const PickContext& ctx) override;

  static bool any_backup(std::span<Endpoint* const> endpoints) noexcept;

private:
  struct Tier {
    std::vector<Endpoint*> endpoints;
    std::vector<std::uint32_t> upstream_index;  // tier index -> upstream index
    std::unique_ptr<Balancer> balancer;
  };
  Pick pick_in(const Tier& tier, const PickContext& ctx) const;

  std::vector<std::uint32_t> tier_index_;  // upstream index -> index within its tier
  Tier primary_;
  Tier backup_;
};

}  // namespace sluice
