#include "sluice/config/loader.hpp"

#include <system_error>

#include "reader.hpp"
#include "sluice/core/file.hpp"

namespace sluice::config {

namespace loader_detail {

using C = Config;

// The file's top level: each section's reader is its row's grammar.
const KeySpec root_rows[] = {
    value_key<&C::server, read_server>("server", "The client side.").by_default(),
    value_key<&C::log, read_log>("log", "The error and access logs.").by_default(),
    custom_key<&C::admin>(
        "admin", [](Reader& r, const toml::node& n, const std::string& p, void* c) { read_admin(r, n, p, static_cast<C*>(c)->admin); },
        [](const void* c) -> std::string { return static_cast<const C*>(c)->admin.enabled ? "on" : "off"; },
        "The admin API; absent = none."),
    value_key<&C::dns, read_dns>("dns", "The resolver of servers from DNS.").by_default(),
    value_key<&C::acme, read_acme_section>("acme", "Storage of ACME certificates.").by_default(),
    value_key<&C::reload, read_reload>("reload", "The watch after a reload.").by_default(),
    custom_key<&C::fleet>(
        "fleet", [](Reader& r, const toml::node& n, const std::string& p, void* c) { read_fleet(r, n, p, static_cast<C*>(c)->fleet); },
        [](const void* c) -> std::string { return static_cast<const C*>(c)->fleet.enabled ? "on" : "off"; },
        "Drains shared with other instances through Redis; absent = none.")
        .restart(),
    value_key<&C::routes, read_routes>("route", "Which upstream serves a request."),
    value_key<&C::upstreams, read_upstreams>("upstreams", "The groups of servers."),
};

// What goes where: with routes, every route must name an upstream that exists; without
// routes, the only upstream takes all traffic, so there must be exactly one.
void check_routing(Reader& r, const Read& read, const Config& config) {
  if (!read.present<&C::upstreams>()) {
    // A front door that only answers itself (an HTTP -> HTTPS redirector) needs no upstream.
    if (!r.answers_only) r.error(read.table(), read.path<&C::upstreams>(), std::string(no_upstream_message));
    return;
  }
  if (config.upstreams.empty()) return;  // already reported; every route would repeat it
  std::vector<std::string_view> names;
  for (const auto& upstream : config.upstreams) names.push_back(upstream.name);
  if (config.upstreams.size() > 1 && !read.present<&C::routes>()) {
    r.error(read.where<&C::upstreams>(), read.path<&C::routes>(),
            std::to_string(names.size()) + " upstreams (" + join_words(names) +
                ") but no [[route]] to choose between them; add routes, or keep one upstream");
  }
  for (std::size_t i = 0; i < config.routes.size(); ++i) {
    const auto& [node, path] = r.route_upstreams[i];
    const auto& name = config.routes[i].upstream;
    if (node == nullptr || config.find_upstream(name) != nullptr) continue;
    r.error(*node, path, unknown_message("upstream", name, names));
  }
}

Config build(Reader& r, const toml::table& root) {
  Config config;
  config.source = r.file();
  const Read read = r.walk(root, "", root_rows, &config);
  check_routing(r, read, config);
  r.record(root, "", root_rows, &config);
  config.keys = r.take_keys();
  return config;
}

std::string plural(std::size_t count, std::string_view noun) {
  return std::to_string(count) + " " + std::string(noun) + (count == 1 ? "" : "s");
}

}  // namespace loader_detail

// Each section's path from the rows that lead to it ("upstreams.NAME.retry").
std::vector<SectionSpec> all_sections() {
  using loader_detail::root_rows;
  using C = Config;
  using U = UpstreamConfig;
  static const ServerSection server;
  static const TlsListenerConfig tls;
  static const AcmeConfig acme_listener;
  static const LogSection log;
  static const AdminSection admin;
  static const DnsSection dns;
  static const AcmeSection acme;
  static const ReloadSection reload;
  static const FleetSection fleet;
  static const RouteConfig route;
  static const U upstream;
  static const ServerConfig entry;
  static const HealthCheckConfig health;
  static const compress::Policy compress;
  const std::string s(name_in<&C::server>(root_rows));
  const std::string u = child_path(name_in<&C::upstreams>(root_rows), "NAME");
  const std::string c = child_path(u, name_in<&U::compress>(upstream_table));
  return {{s, server_table, &server},
          {child_path(s, name_in<&ServerSection::tls>(server_table)), tls_listener_table, &tls, true},
          {child_path(child_path(s, name_in<&ServerSection::tls>(server_table)), name_in<&TlsListenerConfig::acme>(tls_listener_table)),
           acme_listener_table, &acme_listener},
          {std::string(name_in<&C::log>(root_rows)), log_table, &log},
          {std::string(name_in<&C::admin>(root_rows)), admin_table, &admin},
          {std::string(name_in<&C::dns>(root_rows)), dns_table, &dns},
          {std::string(name_in<&C::acme>(root_rows)), acme_table, &acme},
          {std::string(name_in<&C::reload>(root_rows)), reload_table, &reload},
          {std::string(name_in<&C::fleet>(root_rows)), fleet_table, &fleet},
          {std::string(name_in<&C::routes>(root_rows)), route_table, &route, true},
          {u, upstream_table, &upstream},
          {child_path(u, name_in<&U::servers>(upstream_table)), server_entry_table, &entry, true},
          {child_path(u, name_in<&U::health>(upstream_table)), health_table, &health},
          {child_path(u, name_in<&U::passive>(upstream_table)), passive_table, &upstream.passive},
          {child_path(u, name_in<&U::retry>(upstream_table)), retry_table, &upstream.retry},
          {child_path(u, name_in<&U::idempotency>(upstream_table)), idempotency_table, &upstream.idempotency},
          {c, compress_table, &compress},
          {child_path(c, name_in<&compress::Policy::levels>(compress_table)), compress_level_table, &compress.levels}};
}

std::string ConfigError::to_string() const {
  std::string out = file;
  // Line 0: the error is about the file as a whole (it could not be read).
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  if (!key_path.empty()) out += key_path + ": ";
  return out + message;
}

LoadResult load_string(std::string_view toml_text, std::string_view source) {
  LoadResult result;
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    // toml++ stops at the first syntax error; nothing after it can be trusted.
    result.errors.push_back({std::string(source), static_cast<int>(e.source().begin.line),
                             static_cast<int>(e.source().begin.column), "", std::string(e.description())});
    return result;
  }
  Reader reader(source);
  Config config = loader_detail::build(reader, root);
  result.errors = reader.take_errors();
  result.warnings = reader.take_warnings();
  if (result.errors.empty()) {
    config.text = std::string(toml_text);
    result.config = std::move(config);
  }
  return result;
}

LoadResult load_file(const std::string& path) {
  std::string text;
  if (const int error = read_whole_file(path, text); error != 0) {
    LoadResult result;
    result.errors.push_back({path, 0, 0, "", "cannot read: " + std::system_category().message(error)});
    return result;
  }
  return load_string(text, path);
}

std::string summary(const Config& config) {
  using loader_detail::plural;
  std::size_t servers = 0;
  for (const auto& upstream : config.upstreams) servers += upstream.servers.size();
  const std::string source = config.source.empty() ? "<config>" : config.source;
  std::size_t tls = 0;
  for (const auto& t : config.server.tls) tls += t.listen.size();
  return source + ": ok: " + plural(config.server.listen.size() + tls, "listener") +
         (tls != 0 ? " (" + std::to_string(tls) + " TLS)" : "") + ", " + plural(config.upstreams.size(), "upstream") +
         " (" + plural(servers, "server") + "), " + plural(config.routes.size(), "route") + ", " +
         (config.admin.enabled ? "admin " + config.admin.listen.to_string() : "no admin");
}

}  // namespace sluice::config
