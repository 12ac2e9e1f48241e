#include "sluice/runtime/snapshot.hpp"

#include "sluice/idempotency/guard.hpp"

namespace sluice {

std::shared_ptr<const Snapshot> build_snapshot(std::shared_ptr<const config::Config> config,
                                               EndpointDirectory& directory, std::uint64_t version) {
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->config = config;
  snapshot->version = version;
  for (const auto& listener : config->server.tls)
    snapshot->tls.push_back(std::make_shared<tls::ServerContext>(listener));
  for (const auto& u : config->upstreams) {
    snapshot->upstreams.push_back(
        std::make_unique<Upstream>(u, directory.obtain(u), directory.unserved_counters(u.name),
                                   config->server.worker_count()));
    snapshot->upstreams.back()->set_idempotency(idempotency::make_guard(u, steady_clock()));
  }
  directory.prune();
  auto find = [&](const std::string& name) -> const Upstream* {
    for (const auto& u : snapshot->upstreams)
      if (u->name() == name) return u.get();
    return nullptr;
  };
  std::vector<Router::Route> routes;
  for (const auto& r : config->routes) routes.push_back({r.host, r.path_prefix, find(r.upstream)});
  const Upstream* fallback = snapshot->upstreams.size() == 1 ? snapshot->upstreams.front().get() : nullptr;
  snapshot->router = Router(std::move(routes), fallback);
  return snapshot;
}

}  // namespace sluice
