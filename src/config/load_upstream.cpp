// [upstreams.NAME] and its [[upstreams.NAME.servers]]: where requests go (docs/balancing.md).
#include <boost/url/ipv4_address.hpp>
#include <boost/url/ipv6_address.hpp>

#include "reader.hpp"
#include "sluice/config/units.hpp"
#include "sluice/tls/context.hpp"

namespace sluice::config {

namespace upstream_section {

using U = UpstreamConfig;
using S = ServerConfig;

constexpr std::array<std::string_view, 2> all_down_words{"fail", "panic"};

bool upstream_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

// Server names may appear in metrics labels, logs and admin URLs: no spaces, no '/'.
bool server_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':';
}

const KeySpec upstream_rows[] = {
    choice_key<&U::balance>("balance", "balance policy", "The balancing policy."),
    duration_key<&U::connect_timeout>("connect_timeout", false, "Connecting to a server."),
    duration_key<&U::response_timeout>("response_timeout", false, "Last request byte sent to first response byte."),
    duration_key<&U::send_timeout>("send_timeout", false, "A request body making no progress this long ends the try."),
    // keepalive = 0 turns pooling off; the timeout still has to be a real one.
    integer_key<&U::keepalive>("keepalive", 0, 100'000, "Idle pooled connections per server, per worker."),
    duration_key<&U::keepalive_timeout>("keepalive_timeout", false, "An idle pooled connection's life."),
    duration_key<&U::tunnel_idle_timeout>("tunnel_idle_timeout", false, "An Upgrade tunnel idle this long closes."),
    custom_key("health", [](const void* u) -> std::string { return static_cast<const U*>(u)->health ? "on" : "off"; },
               "Active probes ([upstreams.NAME.health])."),
    custom_key("passive", nullptr, "Passive ejection ([upstreams.NAME.passive])."),
    duration_key<&U::slow_start>("slow_start", true, "A server coming up takes traffic gradually over this."),
    choice_key<&U::panic_when_all_down>("when_all_down", "when_all_down policy", all_down_words,
                                        "fail (503) or panic (use every server) when none is up."),
    custom_key("hash_key", [](const void* u) { return toml_string(static_cast<const U*>(u)->hash_key.to_string()); },
               "What a hash upstream balances on."),
    number_key<&U::hash_balance_factor>("hash_balance_factor", 0.0, 100.0, "Bounded load for hash; 0 = off.")
        .rule([](const void* u) -> std::string {
          const double f = static_cast<const U*>(u)->hash_balance_factor;
          return f == 0 || f >= 1.0 ? "" : "must be 0 (off) or at least 1.0";
        }),
    integer_key<&U::queue_size>("queue_size", 0, 1'000'000, "Requests waiting for a server; 0 = none wait."),
    duration_key<&U::queue_timeout>("queue_timeout", false, "A queued request's wait."),
    custom_key("retry", nullptr, "Retries ([upstreams.NAME.retry])."),
    custom_key("idempotency", nullptr, "Idempotency-Key requests ([upstreams.NAME.idempotency])."),
    bool_key<&U::tls>("tls", "TLS towards every server."),
    bool_key<&U::tls_verify>("tls_verify", "Verify the servers' certificates."),
    string_key<&U::tls_ca_file>("tls_ca_file", "Trusted CAs; \"\" = the system's.")
        .rule([](const void* u) { return tls::check_ca_file(static_cast<const U*>(u)->tls_ca_file).value_or(""); }),
    string_key<&U::tls_server_name>("tls_server_name", "SNI and the name verified; \"\" = each server's host.")
        .rule([](const void* u) -> std::string {
          const auto& name = static_cast<const U*>(u)->tls_server_name;
          if (name.empty() || normalize_host_pattern(name) || boost::urls::parse_ipv4_address(name) ||
              boost::urls::parse_ipv6_address(name))
            return {};
          return "invalid server name '" + name + "'";
        }),
    string_key<&U::tls_cert>("tls_cert", "Client certificate (with tls_key)."),
    string_key<&U::tls_key>("tls_key", "Client certificate's key."),
    custom_key("request_headers", [](const void* u) { return header_rules_text(static_cast<const U*>(u)->request_headers); },
               "Header rules on the request (before the route's)."),
    custom_key("response_headers", [](const void* u) { return header_rules_text(static_cast<const U*>(u)->response_headers); },
               "Header rules on the response."),
    custom_key(compress_key, [](const void* u) { return compress_text(static_cast<const U*>(u)->compress); },
               "Response compression ({ codings, types, min_bytes, level }); absent = none."),
    custom_key("discover", nullptr, "Servers from SRV records ({ srv, resolve_interval })."),
    custom_key("servers", nullptr, "The servers ([[upstreams.NAME.servers]])."),
};

const KeySpec discover_rows[] = {
    string_key<&U::discover_srv>("srv", "The SRV name to follow.").rule([](const void* u) -> std::string {
      const auto& srv = static_cast<const U*>(u)->discover_srv;
      return all_of_chars(srv, dns_name_char) ? "" : "'" + srv + "' is not a DNS name";
    }),
    duration_key<&U::discover_interval>("resolve_interval", false, "Re-resolve this often; default: the TTL."),
};

const KeySpec server_rows[] = {
    custom_key("address", nullptr, "host:port, http://host:port or https://host:port."),
    string_key<&S::name>("name", "The server's identity; \"\" = its address.").rule([](const void* s) -> std::string {
      const auto& name = static_cast<const S*>(s)->name;
      if (all_of_chars(name, server_name_char)) return {};
      return "server name '" + name + "' may use only letters, digits, '-', '_', '.' and ':'";
    }),
    integer_key<&S::weight>("weight", 1, 1000, "Relative share of requests.")
        .hint("; to take a server out of rotation, drain it instead of setting weight 0"),
    bool_key<&S::backup>("backup", "Used only while no primary server is available."),
    integer_key<&S::max_conns>("max_conns", 0, 1'000'000, "In-flight requests to this server; 0 = unlimited."),
    bool_key<&S::drain>("drain", "No new requests; in-flight ones finish."),
    bool_key<&S::resolve>("resolve", "The address is a DNS name whose every record is a server."),
    duration_key<&S::resolve_interval>("resolve_interval", false, "Re-resolve this often; default: the TTL."),
};

// The upstream's TLS keys; the servers' own "https://" come with their addresses.
void check_upstream_tls(Reader& r, const Read& read, const std::string& path, U& u) {
  const toml::node* cert = read["tls_cert"];
  const toml::node* key = read["tls_key"];
  if ((cert != nullptr) != (key != nullptr))
    r.error(cert != nullptr ? *cert : *key, path + (cert != nullptr ? ".tls_cert" : ".tls_key"),
            "tls_cert and tls_key go together (a client certificate and its key)");
  else if (cert != nullptr)
    r.check_key_pair(*cert, *key, path, "tls_cert", "tls_key", u.tls_cert, u.tls_key);
}

void check_balancing(Reader& r, const toml::table& table, const Read& read, const std::string& path, U& u) {
  std::string hash_key;
  if (const auto* node = read["hash_key"]; node != nullptr && r.take_string(table, "hash_key", path + ".hash_key", hash_key)) {
    if (auto spec = HashKeySpec::parse(hash_key)) u.hash_key = std::move(*spec);
    else
      r.error(*node, path + ".hash_key",
              "unknown hash key '" + hash_key + "'; expected client_ip, uri, header:NAME, cookie:NAME or query:NAME");
  }
  // Keys that only one balance policy reads: accepted under another, but said to have no effect.
  if (u.balance == Balance::hash) return;
  for (const std::string_view key : {"hash_key", "hash_balance_factor"})
    if (const toml::node* node = table.get(key))
      r.warn(*node, path + "." + std::string(key),
             "has no effect: balance is \"" + std::string(name_of(u.balance)) + "\", not \"hash\"");
}

// discover = { srv = "_http._tcp.app.service.consul", resolve_interval = "10s" }
void read_discover(Reader& r, const toml::table& table, const std::string& path, U& u) {
  const toml::table* discover = r.section(table, "discover");
  if (discover == nullptr) return;
  const std::string p = path + ".discover";
  if (!r.require(*discover, "srv", p, "the SRV name to follow")) {
    r.check_keys(*discover, p, discover_rows);
    return;
  }
  r.walk(*discover, p, discover_rows, &u);
  r.record(*discover, p, discover_rows, &u);
}

// "https://host:port" puts TLS on this server; "http://" is said for symmetry.
std::optional<HostPort> read_server_address(Reader& r, const toml::node& node, const std::string& path, S& server) {
  const auto* text = node.as_string();
  if (text == nullptr || text->get().find("://") == std::string::npos)
    return r.parse_address(node, path, false, !server.resolve);
  std::string_view rest = text->get();
  if (rest.starts_with("https://")) {
    server.tls = true;
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    r.error(node, path,
            "unknown scheme in '" + text->get() + "'; expected host:port, http://host:port or https://host:port");
    return std::nullopt;
  }
  std::string why;
  auto address = parse_host_port(rest, false, &why);
  if (!address) r.error(node, path, why);
  if (address && !server.resolve && !Reader::resolvable(address->host, &why)) {
    r.error(node, path, why);
    address.reset();
  }
  return address;
}

// nullopt when the server has no usable identity (its address is missing or bad).
std::optional<S> read_server_entry(Reader& r, const toml::table& table, const std::string& path) {
  S server;
  server.where = location_of(table);
  const Read read = r.walk(table, path, server_rows, &server);
  if (const auto* interval = read["resolve_interval"]; interval != nullptr && !server.resolve)
    r.warn(*interval, path + ".resolve_interval", "has no effect without resolve = true");
  r.record(table, path, server_rows, &server);
  if (!r.require(table, "address", path, "the server's host:port")) return std::nullopt;
  const toml::node& node = *table.get("address");
  auto address = read_server_address(r, node, path + ".address", server);
  if (!address) return std::nullopt;
  server.address = std::move(*address);
  // A `resolve` server's address must be a name: an IP literal has no records to follow.
  const auto& host = server.address.host;
  if (server.resolve && (boost::urls::parse_ipv4_address(host) || boost::urls::parse_ipv6_address(host)))
    r.error(node, path + ".address", "resolve = true needs a DNS name, but '" + host + "' is an IP address");
  else if (server.resolve && !all_of_chars(host, dns_name_char))
    r.error(node, path + ".address", "'" + host + "' is not a DNS name");
  return server;
}

// An absent or empty list is allowed: the upstream exists, the proxy answers 503.
void read_servers(Reader& r, const toml::node& node, const std::string& path, U& upstream) {
  const std::string servers_path = path + ".servers";
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    r.type_error(node, servers_path, "an array of tables ([[" + servers_path + "]])");
    return;
  }
  // identity -> the server that has it first
  std::unordered_map<std::string, std::string> identities;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const std::string server_path = index_path(servers_path, i);
    const toml::table* server_table = array->get(i)->as_table();
    if (server_table == nullptr) {
      r.type_error(*array->get(i), server_path, "a table");
      continue;
    }
    auto server = read_server_entry(r, *server_table, server_path);
    if (!server) continue;
    server->tls = server->tls || upstream.tls;
    const auto [it, inserted] = identities.try_emplace(server->identity(), "servers[" + std::to_string(i) + "]");
    if (!inserted) {
      const std::string key = server->name.empty() ? "address" : "name";
      r.error(*server_table->get(key), server_path + "." + key,
              "duplicate server '" + server->identity() + "' (also " + it->second +
                  "); each server needs a unique name or address");
    }
    upstream.servers.push_back(std::move(*server));
  }
}

U read_upstream(Reader& r, const toml::table& table, const std::string& name, const std::string& path) {
  U u;
  u.name = name;
  u.where = location_of(table);
  const Read read = r.walk(table, path, upstream_rows, &u);
  read_health(r, table, path, u.health);
  read_passive(r, table, path, u.passive);
  check_balancing(r, table, read, path, u);
  read_retry(r, table, path, u);
  read_idempotency(r, table, path, u.idempotency);
  check_upstream_tls(r, read, path, u);
  r.read_header_rules(table, "request_headers", path + ".request_headers", u.request_headers);
  r.read_header_rules(table, "response_headers", path + ".response_headers", u.response_headers);
  read_discover(r, table, path, u);
  if (auto compress = read_compress(r, table, path)) u.compress = std::move(*compress);
  r.record(table, path, upstream_rows, &u);
  if (const toml::node* node = read["servers"]) read_servers(r, *node, path, u);
  return u;
}

}  // namespace upstream_section

const KeyTable upstream_table = upstream_section::upstream_rows;
const KeyTable server_entry_table = upstream_section::server_rows;

void read_upstreams(Reader& r, const toml::table& root, std::vector<UpstreamConfig>& out) {
  const toml::node* node = root.get("upstreams");
  const std::string no_upstream = "no upstream defined; add an [upstreams.NAME] section with its servers";
  if (node == nullptr) {
    // A front door that only answers itself (an HTTP -> HTTPS redirector) needs no upstream.
    if (!r.answers_only) r.error(root, "upstreams", no_upstream);
    return;
  }
  const toml::table* table = node->as_table();
  if (table == nullptr) {
    r.type_error(*node, "upstreams", "a table of upstreams ([upstreams.NAME])");
    return;
  }
  if (table->empty()) r.error(*table, "upstreams", no_upstream);
  // Config::upstreams promises file order.
  for (const auto& [key, value] : in_file_order(*table)) {
    const std::string name(key->str());
    const std::string path = "upstreams." + name;
    if (!all_of_chars(name, upstream_section::upstream_name_char))
      r.error(key->source(), path, "upstream name '" + name + "' may use only letters, digits, '-' and '_'");
    const toml::table* upstream = value->as_table();
    if (upstream == nullptr) {
      r.type_error(*value, path, "a table");
      continue;
    }
    out.push_back(upstream_section::read_upstream(r, *upstream, name, path));
  }
}

}  // namespace sluice::config
