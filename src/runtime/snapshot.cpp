#include "sluice/runtime/snapshot.hpp"

#include <algorithm>
#include <stdexcept>
#include "sluice/idempotency/guard.hpp"

namespace sluice {

namespace {

void apply(http::HeaderRules& rules, const config::HeaderRulesConfig& block) {
  rules.apply(block.remove, block.set, block.add);
}

http::Template compile(const std::string& text, http::TemplateText kind) {
  std::string why;
  auto t = http::Template::parse(text, kind, &why);
  if (!t) throw std::runtime_error("template '" + text + "': " + why);  // the loader checked it
  return std::move(*t);
}

}  // namespace

// The route's edge rules in their flat form (docs/edge.md): the upstream's header rules first,
// then the route's, so that a route can override what its upstream sets.
Router::Route compile_route(const config::RouteConfig& r, const Upstream* upstream) {
  Router::Route route;
  route.host = r.host;
  route.path_prefix = r.path_prefix;
  route.upstream = upstream;
  route.require_client_cert = r.require_client_cert;
  if (upstream != nullptr) {
    apply(route.request_rules, upstream->config().request_headers);
    apply(route.response_rules, upstream->config().response_headers);
  }
  apply(route.request_rules, r.request_headers);
  apply(route.response_rules, r.response_headers);
  if (r.strip_prefix || !r.rewrite_prefix.empty())
    route.rewrite = http::PathRewrite{r.path_prefix.size(), r.strip_prefix ? "/" : r.rewrite_prefix};
  if (!r.error_pages.empty()) route.error_pages = &r.error_pages;
  const config::CompressConfig* compress = r.compress ? &*r.compress : nullptr;
  if (compress == nullptr && upstream != nullptr) compress = &upstream->config().compress;
  if (compress != nullptr && compress->has_value()) route.compress = &**compress;
  if (r.answer) {
    route.answer.emplace();
    route.answer->status = r.answer->status;
    route.answer->location = compile(r.answer->location, http::TemplateText::uri);
    route.answer->body = compile(r.answer->body, http::TemplateText::body);
    route.answer->content_type = r.answer->content_type;
  }
  return route;
}

std::shared_ptr<const Snapshot> build_snapshot(std::shared_ptr<const config::Config> config,
                                               EndpointDirectory& directory, std::uint64_t version,
                                               const Snapshot* previous, tls::OcspStapler* ocsp,
                                               std::shared_ptr<tls::TicketKeys> ticket_keys) {
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->config = config;
  snapshot->version = version;
  for (const auto& listener : config->server.tls) {
    tls::ServerSettings settings;
    settings.min_tls13 = listener.min_tls13;
    settings.ciphers = listener.ciphers;
    settings.client_ca_file = listener.client_ca_file;
    settings.verify_client = listener.verify_client;
    settings.session_ticket_key_file = listener.session_ticket_key_file;
    settings.shared_ticket_keys = ticket_keys;
    settings.http2 = std::find(listener.alpn.begin(), listener.alpn.end(), config::Alpn::h2) != listener.alpn.end();
    settings.ocsp_stapling = listener.ocsp_stapling;
    settings.ocsp = ocsp;
    for (const auto& c : listener.certificates)
      settings.certificates.push_back({c.cert, c.key, c.ocsp_responder});
    if (listener.acme)
      settings.acme = tls::AcmeSettings{listener.acme->domains, config->acme.storage, listener.acme->challenge};
    snapshot->tls.push_back(std::make_shared<tls::ServerContext>(settings));
  }
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
  for (const auto& r : config->routes) {
    routes.push_back(compile_route(r, find(r.upstream)));
    if (!proxy::RouteAdmission::needed(r)) continue;
    const proxy::RouteAdmission* before = nullptr;
    if (previous != nullptr)
      for (const auto& a : previous->admissions)
        if (a->label() == config::route_label(r.host, r.path_prefix)) before = a.get();
    snapshot->admissions.push_back(std::make_shared<proxy::RouteAdmission>(r, before));
    routes.back().admission = snapshot->admissions.back().get();
  }
  const Upstream* fallback = snapshot->upstreams.size() == 1 ? snapshot->upstreams.front().get() : nullptr;
  if (fallback != nullptr) {
    auto only = compile_route({}, fallback);
    snapshot->router = Router(std::move(routes), fallback, std::move(only.request_rules),
                              std::move(only.response_rules), only.compress);
  } else {
    snapshot->router = Router(std::move(routes), nullptr);
  }
  return snapshot;
}

}  // namespace sluice
