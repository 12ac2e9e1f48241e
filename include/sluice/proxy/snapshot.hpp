#pragma once
// Everything a request needs from the configuration, frozen: the parsed Config, the upstream
// groups with their balancers, and the router. Published as shared_ptr<const Snapshot>; a request
// keeps the snapshot it started with, so a reload never changes anything under its feet. The
// type is here, where workers read it; runtime/snapshot builds it (docs/architecture.md, Layers).
#include <cstdint>
#include <memory>
#include <vector>

#include "sluice/config/config.hpp"
#include "sluice/proxy/admission.hpp"
#include "sluice/proxy/router.hpp"
#include "sluice/tls/context.hpp"
#include "sluice/upstream/upstream.hpp"

namespace sluice {

struct Snapshot {
  std::shared_ptr<const config::Config> config;
  std::vector<std::unique_ptr<Upstream>> upstreams;
  Router router;
  // One per [[server.tls]] listener, in config order (certificates loaded at this snapshot's
  // build: a reload reloads them). A connection holds its own reference for its lifetime.
  std::vector<std::shared_ptr<tls::ServerContext>> tls;
  // One per route with allow/deny/rate_limit, in config order (docs/edge.md); read by workers.
  std::vector<std::shared_ptr<const proxy::RouteAdmission>> admissions;
  std::uint64_t version = 0;
};

}  // namespace sluice
