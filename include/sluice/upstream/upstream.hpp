#pragma once
// An upstream group as one config snapshot sees it: its settings, its endpoints and its balancer.
// Built on the control thread, then only read by workers (the balancer's own atomics aside).
#include <memory>
#include <string>
#include <vector>

#include "sluice/balancer/balancer.hpp"
#include "sluice/config/config.hpp"
#include "sluice/upstream/endpoint.hpp"

namespace sluice {

class Upstream {
public:
  Upstream(config::UpstreamConfig config, std::vector<std::shared_ptr<Endpoint>> endpoints);
  Upstream(const Upstream&) = delete;
  Upstream& operator=(const Upstream&) = delete;

  const std::string& name() const noexcept { return config_.name; }
  const config::UpstreamConfig& config() const noexcept { return config_; }
  std::span<Endpoint* const> endpoints() const noexcept { return raw_; }
  const std::vector<std::shared_ptr<Endpoint>>& shared_endpoints() const noexcept { return endpoints_; }
  Endpoint* endpoint(std::uint32_t index) const noexcept { return raw_[index]; }

  // Thread-safe (called by every worker).
  Pick pick(const PickContext& ctx) const { return balancer_->pick(ctx); }

private:
  config::UpstreamConfig config_;
  std::vector<std::shared_ptr<Endpoint>> endpoints_;  // keeps them alive for this snapshot
  std::vector<Endpoint*> raw_;                         // what the balancer iterates
  std::unique_ptr<Balancer> balancer_;
};

// Endpoints by identity, from the previous snapshot, so that a reload keeps their state.
class EndpointDirectory {
public:
  // Returns the existing endpoint for (upstream, identity) if its address is unchanged, else a
  // new one. Resolves host names (control thread only: may block on DNS). Throws on failure.
  std::shared_ptr<Endpoint> obtain(const std::string& upstream, const config::ServerConfig& server);

private:
  std::vector<std::pair<std::string, std::shared_ptr<Endpoint>>> known_;  // key: upstream + '\n' + identity
};

// Resolves "host" (an IP literal or a name) to one address; control thread only.
boost::asio::ip::tcp::endpoint resolve_host_port(const config::HostPort& hp);

}  // namespace sluice
