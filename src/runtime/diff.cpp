#include "sluice/runtime/diff.hpp"

#include <cstdio>
#include <memory>

#include "sluice/balancer/hash.hpp"
#include "sluice/balancer/registry.hpp"
#include "sluice/config/key_spec.hpp"
#include "sluice/endpoint/endpoint.hpp"

namespace sluice {

namespace {

const config::ServerConfig* find_server(const config::UpstreamConfig& u, const std::string& identity) {
  for (const auto& s : u.servers)
    if (s.identity() == identity) return &s;
  return nullptr;
}

// A balancer over endpoints that stand for the upstream's servers (identity and weight are all
// that hashing looks at), for answering "where would this key go".
struct Model {
  std::vector<std::unique_ptr<Endpoint>> owned;
  std::vector<Endpoint*> raw;
  std::unique_ptr<Balancer> balancer;

  explicit Model(const config::UpstreamConfig& u) {
    for (const auto& s : u.servers) {
      owned.push_back(std::make_unique<Endpoint>(s.identity(), s.address, boost::asio::ip::tcp::endpoint{}, s.weight));
      owned.back()->set_draining(s.drain);
      owned.back()->set_backup(s.backup);
      raw.push_back(owned.back().get());
    }
    config::UpstreamConfig plain = u;
    plain.hash_balance_factor = 0;  // load-free model: where keys live, not where they spill
    balancer = make_balancer(config::Balance::hash, raw, plain);
  }
  std::string owner(std::uint64_t hash) const {
    PickContext ctx;
    ctx.hash = hash;
    ctx.has_hash = true;
    const auto p = balancer->pick(ctx);
    return p ? raw[p.index]->identity() : std::string();
  }
};

// Servers and routes are compared by identity below, not by their index in the file.
bool compared_by_identity(std::string_view path) {
  return path.starts_with("route[") || path.find(".servers[") != std::string_view::npos;
}

// "upstreams.app.retry.on" -> "app"; "" for keys outside an upstream.
std::string_view upstream_of(std::string_view path) {
  constexpr std::string_view prefix = "upstreams.";
  if (!path.starts_with(prefix)) return {};
  path.remove_prefix(prefix.size());
  return path.substr(0, path.find('.'));
}

// Key by key, in the new file's order: what changes, what appears (a section added) and what
// goes. Keys of an upstream that only one side has are left to its "+ upstream" / "- upstream".
void diff_keys(const config::Config& a, const config::Config& b, std::vector<std::string>& out) {
  const auto on_both_sides = [&](std::string_view path) {
    const auto u = upstream_of(path);
    return u.empty() || (a.find_upstream(u) != nullptr && b.find_upstream(u) != nullptr);
  };
  const auto restart = [](const config::KeyValue& k) {
    return k.reload == config::Reload::restart ? std::string(" (needs a restart)") : std::string();
  };
  for (const auto& nk : b.keys) {
    if (compared_by_identity(nk.path) || !on_both_sides(nk.path)) continue;
    const auto* ok = a.find_key(nk.path);
    if (ok == nullptr) out.push_back("+ " + nk.path + " = " + nk.value + restart(nk));
    else if (ok->value != nk.value) out.push_back("~ " + nk.path + ": " + ok->value + " -> " + nk.value + restart(nk));
  }
  for (const auto& ok : a.keys)
    if (!compared_by_identity(ok.path) && on_both_sides(ok.path) && b.find_key(ok.path) == nullptr)
      out.push_back("- " + ok.path + " (was " + ok.value + ")" + restart(ok));
}

// Keys of the routes both sides have (matched by host and path_prefix), key by key: "~ route
// */api/ request_headers: OLD -> NEW". What the route's own line shows (its match, upstream and
// admission: the keys its table marks `in_summary`) is left to the "- route" / "+ route" pair.
void diff_route_keys(const config::Config& a, const config::Config& b, std::vector<std::string>& out) {
  for (std::size_t j = 0; j < b.routes.size(); ++j) {
    const auto label = config::route_label(b.routes[j].host, b.routes[j].path_prefix);
    std::size_t i = 0;
    while (i < a.routes.size() && config::route_label(a.routes[i].host, a.routes[i].path_prefix) != label) ++i;
    if (i == a.routes.size()) continue;
    const std::string new_prefix = "route[" + std::to_string(j) + "].";
    const std::string old_prefix = "route[" + std::to_string(i) + "].";
    for (const auto& nk : b.keys) {
      if (!nk.path.starts_with(new_prefix)) continue;
      const std::string_view key = std::string_view(nk.path).substr(new_prefix.size());
      const auto* ok = a.find_key(old_prefix + std::string(key));
      if (ok != nullptr && ok->value != nk.value && !config::in_route_summary(key))
        out.push_back("~ route " + label + " " + std::string(key) + ": " + ok->value + " -> " + nk.value);
    }
  }
}

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", share * 100.0);
  return buf;
}

}  // namespace

double hash_moved_share(const config::UpstreamConfig& old_upstream,
                        const config::UpstreamConfig& new_upstream, unsigned samples) {
  const Model before(old_upstream), after(new_upstream);
  unsigned moved = 0;
  for (unsigned i = 0; i < samples; ++i) {
    const auto h = hash_mix64(i);
    if (before.owner(h) != after.owner(h)) ++moved;
  }
  return samples == 0 ? 0.0 : static_cast<double>(moved) / samples;
}

std::vector<config::ConfigError> restart_changes(const config::Config& running, const config::Config& file) {
  std::vector<config::ConfigError> out;
  for (const auto& nk : file.keys) {
    if (nk.reload != config::Reload::restart) continue;
    const auto* rk = running.find_key(nk.path);
    const std::string was = rk != nullptr ? rk->value : "(not set)";
    if (was == nk.value) continue;
    out.push_back({file.source, nk.where.line, nk.where.column, nk.path,
                   "changing this needs a restart (running: " + was + ", file: " + nk.value + ")"});
  }
  return out;
}

std::vector<std::string> running_drain_diff(const config::Config& running, const config::Config& file,
                                            const std::vector<RunningServer>& servers) {
  std::vector<std::string> out;
  for (const auto& rs : servers) {
    const auto* ru = running.find_upstream(rs.upstream);
    const auto* fu = file.find_upstream(rs.upstream);
    const auto* in_running = ru != nullptr ? find_server(*ru, rs.server) : nullptr;
    const auto* in_file = fu != nullptr ? find_server(*fu, rs.server) : nullptr;
    if (in_running == nullptr || in_file == nullptr || rs.draining == in_running->drain) continue;
    const std::string prefix = "upstream " + rs.upstream + ": server " + rs.server + " ";
    const std::string set = rs.draining ? "drained through the API" : "undrained through the API";
    // The file's `drain` wins only when it changes; else the API's word stays.
    if (in_file->drain == in_running->drain)
      out.push_back(prefix + set + " (file: drain = " + (in_file->drain ? "true" : "false") +
                    "); stays " + (rs.draining ? "drained" : "undrained") + " after the reload");
    else
      out.push_back(prefix + set + "; the file's drain = " + (in_file->drain ? "true" : "false") +
                    " applies at the reload");
  }
  return out;
}

std::vector<std::string> config_diff(const config::Config& a, const config::Config& b) {
  std::vector<std::string> out;
  diff_keys(a, b, out);
  for (const auto& u : a.upstreams)
    if (b.find_upstream(u.name) == nullptr) out.push_back("- upstream " + u.name);
  for (const auto& nu : b.upstreams) {
    const auto* ou = a.find_upstream(nu.name);
    if (ou == nullptr) {
      out.push_back("+ upstream " + nu.name + " (" + std::to_string(nu.servers.size()) + " servers)");
      continue;
    }
    const std::string prefix = "upstream " + nu.name + ": ";
    if (ou->balance != nu.balance) out.push_back(prefix + "balance " + std::string(config::name_of(ou->balance)) + " -> " +
                                               std::string(config::name_of(nu.balance)));
    for (const auto& os : ou->servers)
      if (find_server(nu, os.identity()) == nullptr) out.push_back(prefix + "- server " + os.identity());
    for (const auto& ns : nu.servers) {
      const auto* os = find_server(*ou, ns.identity());
      if (os == nullptr) {
        out.push_back(prefix + "+ server " + ns.identity() + " (" + ns.address.to_string() + ", weight " +
                      std::to_string(ns.weight) + (ns.resolve ? ", resolved through DNS" : "") + ")");
        continue;
      }
      if (os->address.to_string() != ns.address.to_string())
        out.push_back(prefix + "~ server " + ns.identity() + " address " + os->address.to_string() +
                      " -> " + ns.address.to_string());
      if (os->weight != ns.weight)
        out.push_back(prefix + "~ server " + ns.identity() + " weight " + std::to_string(os->weight) +
                      " -> " + std::to_string(ns.weight));
      if (os->drain != ns.drain)
        out.push_back(prefix + "~ server " + ns.identity() + (ns.drain ? " drained" : " undrained"));
      if (os->resolve != ns.resolve)
        out.push_back(prefix + "~ server " + ns.identity() +
                      (ns.resolve ? " resolved through DNS (every A/AAAA record a server)" : " no longer resolved through DNS"));
      if (os->backup != ns.backup)
        out.push_back(prefix + "~ server " + ns.identity() + (ns.backup ? " becomes a backup" : " becomes a primary"));
    }
    if (nu.balance == config::Balance::hash && ou->balance == config::Balance::hash) {
      const auto share = hash_moved_share(*ou, nu);
      if (share > 0) out.push_back(prefix + "hash: " + percent(share) + " of keys move to another server");
    }
  }
  const auto route_text = [](const config::RouteConfig& r) {
    return config::route_label(r.host, r.path_prefix) +
           (r.answer ? " -> return " + std::to_string(r.answer->status) : " -> " + r.upstream) +
           config::admission_text(r);
  };
  for (const auto& r : a.routes) {
    bool kept = false;
    for (const auto& n : b.routes) kept |= route_text(r) == route_text(n);
    if (!kept) out.push_back("- route " + route_text(r));
  }
  for (const auto& n : b.routes) {
    bool old = false;
    for (const auto& r : a.routes) old |= route_text(r) == route_text(n);
    if (!old) out.push_back("+ route " + route_text(n));
  }
  diff_route_keys(a, b, out);
  return out;
}

}  // namespace sluice
