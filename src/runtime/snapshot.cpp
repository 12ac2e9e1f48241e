#include "sluice/runtime/snapshot.hpp"

namespace sluice {

std::shared_ptr<const Snapshot> build_snapshot(std::shared_ptr<const config::Config> config,
                                               EndpointDirectory& directory, std::uint64_t version,
                                               const Snapshot* previous) {
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->config = config;
  snapshot->version = version;
  for (const auto& listener : config->server.tls)
    snapshot->tls.push_back(std::make_shared<tls::ServerContext>(listener));
  for (const auto& u : config->upstreams) {
    snapshot->upstreams.push_back(
        std::make_unique<Upstream>(u, directory.obtain(u), directory.unserved_counters(u.name),
                                   config->server.worker_count()));
  }
  directory.prune();
  auto find = [&](const std::string& name) -> const Upstream* {
    for (const auto& u : snapshot->upstreams)
      if (u->name() == name) return u.get();
    return nullptr;
  };
  std::vector<Router::Route> routes;
  for (const auto& r : config->routes) {
    routes.push_back({r.host, r.path_prefix, find(r.upstream)});
    if (!proxy::RouteAdmission::needed(r)) continue;
    const proxy::RouteAdmission* before = nullptr;
    if (previous != nullptr)
      for (const auto& a : previous->admissions)
        if (a->label() == r.host + r.path_prefix) before = a.get();
    snapshot->admissions.push_back(std::make_shared<proxy::RouteAdmission>(r, before));
    routes.back().admission = snapshot->admissions.back().get();
  }
  const Upstream* fallback = snapshot->upstreams.size() == 1 ? snapshot->upstreams.front().get() : nullptr;
  snapshot->router = Router(std::move(routes), fallback);
  return snapshot;
}

}  // namespace sluice
