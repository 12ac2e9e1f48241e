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

const KeySpec discover_rows[] = {
    string_key<&U::discover_srv>("srv", "The SRV name to follow.").needed("the SRV name to follow").rule([](const void* u) -> std::string {
      const auto& srv = static_cast<const U*>(u)->discover_srv;
      return all_of_chars(srv, dns_name_char) ? "" : "'" + srv + "' is not a DNS name";
    }),
    duration_key<&U::discover_interval>("resolve_interval", false, "Re-resolve this often; default: the TTL."),
};

// "https://host:port" puts TLS on this server; "http://" is said for symmetry.
std::optional<HostPort> server_address(Reader& r, const toml::node& node, const std::string& path, S& server) {
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

void read_server_address(Reader& r, const toml::node& node, const std::string& path, void* object) {
  S& server = *static_cast<S*>(object);
  auto address = server_address(r, node, path, server);
  if (!address) return;
  server.address = std::move(*address);
  // A `resolve` server's address must be a name: an IP literal has no records to follow.
  const auto& host = server.address.host;
  if (server.resolve && (boost::urls::parse_ipv4_address(host) || boost::urls::parse_ipv6_address(host)))
    r.error(node, path, "resolve = true needs a DNS name, but '" + host + "' is an IP address");
  else if (server.resolve && !all_of_chars(host, dns_name_char))
    r.error(node, path, "'" + host + "' is not a DNS name");
}

const KeySpec server_rows[] = {
    custom_key<&S::address>("address", read_server_address, nullptr, "host:port, http://host:port or https://host:port.")
        .needed("the server's host:port")
        .docs("string (host:port)"),
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

// An absent or empty list is allowed: the upstream exists, the proxy answers 503.
void read_servers(Reader& r, const toml::node& node, const std::string& path, void* upstream) {
  U& u = *static_cast<U*>(upstream);
  // identity -> the server that has it first
  std::unordered_map<std::string, std::string> identities;
  read_tables(r, node, path, "an array of tables ([[" + path + "]])", "a table", [&](const toml::table& table, const std::string& p) {
    S server;
    server.where = location_of(table);
    const Read read = r.walk(table, p, server_rows, &server);
    if (read.at<&S::resolve_interval>() != nullptr && !server.resolve)
      r.warn(*read.at<&S::resolve_interval>(), read.path<&S::resolve_interval>(), "has no effect without resolve = true");
    r.record(table, p, server_rows, &server);
    if (read.at<&S::address>() == nullptr) return;  // no usable identity
    server.tls = server.tls || u.tls;
    const auto [it, inserted] = identities.try_emplace(server.identity(), p.substr(p.rfind('.') + 1));
    if (!inserted) {
      const bool named = !server.name.empty();
      r.error(named ? read.where<&S::name>() : read.where<&S::address>(),
              named ? read.path<&S::name>() : read.path<&S::address>(),
              "duplicate server '" + server.identity() + "' (also " + it->second +
                  "); each server needs a unique name or address");
    }
    u.servers.push_back(std::move(server));
  });
}

// discover = { srv = "_http._tcp.app.service.consul", resolve_interval = "10s" }
void read_discover(Reader& r, const toml::node& node, const std::string& path, void* upstream) {
  const toml::table* discover = r.table_at(&node, path);
  if (discover == nullptr) return;
  r.walk(*discover, path, discover_rows, upstream);
  r.record(*discover, path, discover_rows, upstream);
}

void read_hash_key(Reader& r, const toml::node& node, const std::string& path, HashKeySpec& out) {
  std::string text;
  if (!r.take_string(node, path, text)) return;
  if (auto spec = HashKeySpec::parse(text)) out = std::move(*spec);
  else
    r.error(node, path, "unknown hash key '" + text + "'; expected client_ip, uri, header:NAME, cookie:NAME or query:NAME");
}

const KeySpec upstream_rows[] = {
    choice_key<&U::balance>("balance", "balance policy", "The balancing policy."),
    choice_key<&U::protocol>("protocol", "upstream protocol",
                             "What the servers speak: http1, h2c (HTTP/2 cleartext) or h2 (HTTP/2 over TLS)."),
    duration_key<&U::connect_timeout>("connect_timeout", false, "Connecting to a server."),
    duration_key<&U::response_timeout>("response_timeout", false, "Last request byte sent to first response byte."),
    duration_key<&U::send_timeout>("send_timeout", false, "A request body making no progress this long ends the try."),
    // keepalive = 0 turns pooling off; the timeout still has to be a real one.
    integer_key<&U::keepalive>("keepalive", 0, 100'000, "Idle pooled connections per server, per worker."),
    duration_key<&U::keepalive_timeout>("keepalive_timeout", false, "An idle pooled connection's life."),
    duration_key<&U::tunnel_idle_timeout>("tunnel_idle_timeout", false, "An Upgrade tunnel idle this long closes."),
    value_key<&U::health, read_health, [](const std::optional<HealthCheckConfig>& h) { return h ? "on" : "off"; }>(
        "health", "Active probes ([upstreams.NAME.health])."),
    value_key<&U::passive, read_passive>("passive", "Passive ejection ([upstreams.NAME.passive])."),
    duration_key<&U::slow_start>("slow_start", true, "A server coming up takes traffic gradually over this."),
    choice_key<&U::panic_when_all_down>("when_all_down", "when_all_down policy", all_down_words,
                                        "fail (503) or panic (use every server) when none is up."),
    value_key<&U::hash_key, read_hash_key, [](const HashKeySpec& k) { return toml_string(k.to_string()); }>(
        "hash_key", "What a hash upstream balances on.")
        .docs("string", "`client_ip`, `uri`, `header:NAME`, `cookie:NAME`, `query:NAME`"),
    number_key<&U::hash_balance_factor>("hash_balance_factor", 0.0, 100.0, "Bounded load for hash; 0 = off.")
        .rule([](const void* u) -> std::string {
          const double f = static_cast<const U*>(u)->hash_balance_factor;
          return f == 0 || f >= 1.0 ? "" : "must be 0 (off) or at least 1.0";
        }),
    duration_key<&U::decay>("decay", false, "least_time: how fast a server's latency estimate falls."),
    integer_key<&U::queue_size>("queue_size", 0, 1'000'000, "Requests waiting for a server; 0 = none wait."),
    duration_key<&U::queue_timeout>("queue_timeout", false, "A queued request's wait."),
    custom_key<&U::retry>("retry", read_retry, nullptr, "Retries ([upstreams.NAME.retry]).").by_default(),
    value_key<&U::idempotency, read_idempotency>("idempotency", "Idempotency-Key requests ([upstreams.NAME.idempotency]).")
        .by_default(),
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
    value_key<&U::request_headers, parse_header_rules, header_rules_text>(
        "request_headers", "Header rules on the request (before the route's)."),
    value_key<&U::response_headers, parse_header_rules, header_rules_text>("response_headers",
                                                                           "Header rules on the response."),
    value_key<&U::compress, read_compress, compress_text>(
        "compress", "Response compression ({ codings, types, min_bytes, level }); absent = none."),
    custom_key<&U::discover_srv>("discover", read_discover, nullptr,
                                 "Servers from SRV records ({ srv, resolve_interval })."),
    custom_key<&U::servers>("servers", read_servers, nullptr, "The servers ([[upstreams.NAME.servers]])."),
};

// The upstream's TLS keys; the servers' own "https://" come with their addresses.
void check_upstream_tls(Reader& r, const Read& read, U& u) {
  const bool cert = read.at<&U::tls_cert>() != nullptr, key = read.at<&U::tls_key>() != nullptr;
  if (cert != key)
    r.error(cert ? read.where<&U::tls_cert>() : read.where<&U::tls_key>(),
            cert ? read.path<&U::tls_cert>() : read.path<&U::tls_key>(),
            "tls_cert and tls_key go together (a client certificate and its key)");
  else
    r.check_key_pair<&U::tls_cert, &U::tls_key>(read, u.tls_cert, u.tls_key);
}

// Keys that only one balance policy reads: accepted under another, but said to have no effect.
template <auto Member>
void warn_unread(Reader& r, const Read& read, const U& u, Balance reader) {
  if (u.balance == reader || !read.present<Member>()) return;
  r.warn(read.where<Member>(), read.path<Member>(),
         "has no effect: balance is \"" + std::string(name_of(u.balance)) + "\", not \"" +
             std::string(name_of(reader)) + "\"");
}

void check_balancing(Reader& r, const Read& read, const U& u) {
  warn_unread<&U::hash_key>(r, read, u, Balance::hash);
  warn_unread<&U::hash_balance_factor>(r, read, u, Balance::hash);
  warn_unread<&U::decay>(r, read, u, Balance::least_time);
}

// h2 is HTTP/2 over TLS (chosen by ALPN), h2c cleartext HTTP/2: a server on the other kind of
// connection could not be spoken to.
void check_protocol(Reader& r, const Read& read, const U& u) {
  if (u.protocol == UpstreamProtocol::http1) return;
  for (const auto& server : u.servers) {
    const bool h2 = u.protocol == UpstreamProtocol::h2;
    if (server.tls == h2) continue;
    r.error(read.where<&U::protocol>(), read.path<&U::protocol>(),
            h2 ? "\"h2\" is HTTP/2 over TLS, but server '" + server.identity() +
                     "' has no TLS (set tls = true or an https:// address, or use \"h2c\")"
               : "\"h2c\" is cleartext HTTP/2, but server '" + server.identity() + "' uses TLS (use \"h2\")");
    return;
  }
}

U read_upstream(Reader& r, const toml::table& table, const std::string& name, const std::string& path) {
  U u;
  u.name = name;
  u.where = location_of(table);
  const Read read = r.walk(table, path, upstream_rows, &u);
  check_balancing(r, read, u);
  check_upstream_tls(r, read, u);
  check_protocol(r, read, u);
  r.record(table, path, upstream_rows, &u);
  return u;
}

}  // namespace upstream_section

const KeyTable upstream_table = upstream_section::upstream_rows;
const KeyTable server_entry_table = upstream_section::server_rows;

void read_upstreams(Reader& r, const toml::node& node, const std::string& path, std::vector<UpstreamConfig>& out) {
  const toml::table* table = node.as_table();
  if (table == nullptr) return r.type_error(node, path, "a table of upstreams ([upstreams.NAME])");
  if (table->empty()) r.error(*table, path, std::string(no_upstream_message));
  // Config::upstreams promises file order.
  for (const auto& [key, value] : in_file_order(*table)) {
    const std::string name(key->str());
    const std::string upstream_path = child_path(path, name);
    if (!all_of_chars(name, upstream_section::upstream_name_char))
      r.error(key->source(), upstream_path, "upstream name '" + name + "' may use only letters, digits, '-' and '_'");
    if (const toml::table* upstream = r.table_at(value, upstream_path))
      out.push_back(upstream_section::read_upstream(r, *upstream, name, upstream_path));
  }
}

}  // namespace sluice::config
