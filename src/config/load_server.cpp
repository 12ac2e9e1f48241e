// [server] and [[server.tls]]: the client side (docs/configuration.md).
#include <algorithm>

#include "reader.hpp"
#include "sluice/config/units.hpp"
#include "sluice/tls/context.hpp"

namespace sluice::config {

namespace server_section {

using S = ServerSection;
using T = TlsListenerConfig;

// The bounds below are documented in docs/configuration.md (generated from these tables).
constexpr std::uint64_t no_limit = std::numeric_limits<std::uint64_t>::max();
constexpr std::array<std::string_view, 2> forwarded_words{"off", "add"};
constexpr std::array<std::string_view, 2> tls_versions{"1.2", "1.3"};

const KeySpec server_rows[] = {
    custom_key("listen", [](const void* s) { return addresses_text(static_cast<const S*>(s)->listen); },
               "Where clients connect with plain HTTP."),
    integer_key<&S::workers>("workers", 0, 1024, "Worker threads; 0 = one per core.").restart(),
    duration_key<&S::header_timeout>("header_timeout", false, "The whole request head must arrive within this."),
    duration_key<&S::idle_timeout>("idle_timeout", false, "A keep-alive connection's wait between requests."),
    // 0 is meaningful here: close in-flight requests at once.
    duration_key<&S::shutdown_timeout>("shutdown_timeout", true, "On SIGTERM, in-flight requests get this long."),
    size_key<&S::max_header_bytes>("max_header_bytes", 1 * KiB, 1 * MiB, "Largest request head (431 beyond)."),
    // The request line is part of the head, so a longer URI limit could never be reached.
    size_key<&S::max_uri_bytes>("max_uri_bytes", 64, 1 * MiB, "Longest request-target (414 beyond).")
        .rule([](const void* object) -> std::string {
          const auto& s = *static_cast<const S*>(object);
          if (s.max_uri_bytes <= s.max_header_bytes) return {};
          return "must not exceed server.max_header_bytes (" + format_size(s.max_header_bytes) + "), got " +
                 format_size(s.max_uri_bytes);
        }),
    size_key<&S::max_body_bytes>("max_body_bytes", 0, no_limit, "Largest request body; 0 = unlimited."),
    integer_key<&S::max_connections>("max_connections", 1, 1'000'000, "Open client connections."),
    duration_key<&S::shutdown_delay>("shutdown_delay", true, "On SIGTERM, keep accepting this long."),
    bool_key<&S::watch_config>("watch_config", "Reload when the config file changes."),
    // Live: set on the open listening sockets at the reload.
    bool_key<&S::defer_accept>("defer_accept", "Hand a connection over once its first bytes came."),
    duration_key<&S::tunnel_drain_timeout>("tunnel_drain_timeout", false,
                                           "Tunnels of a drained server or old config close this long after."),
    // The wait before the one READY=1 of a start; a running process is past it.
    duration_key<&S::health_ready_timeout>("health_ready_timeout", true, "Readiness waits for first probes.")
        .restart(),
    // Read once at start-up (restore) and owned by this process until it stops.
    string_key<&S::state_file>("state_file", "Drains, health and slow start kept across restarts.")
        .restart()
        .rule([](const void* s) -> std::string {
          if (!static_cast<const S*>(s)->state_file.empty()) return {};
          return "must not be empty; remove the key to keep no state";
        }),
    custom_key("tls", nullptr, "TLS listeners ([[server.tls]])."),
    // Edge (docs/edge.md), all live: a session reads them from the snapshot current when it
    // starts (proxy_protocol, trusted_proxies) or when its request is routed (the rest).
    bool_key<&S::proxy_protocol>("proxy_protocol", "The plain listeners expect a PROXY protocol header."),
    custom_key("trusted_proxies", [](const void* s) { return cidrs_text(static_cast<const S*>(s)->trusted_proxies); },
               "Balancers whose PROXY header and X-Forwarded-For are believed."),
    choice_key<&S::forwarded_header>("forwarded_header", "forwarded_header mode", forwarded_words,
                                     "add: also send RFC 7239 Forwarded."),
    choice_key<&S::error_detail>("error_detail", "error_detail", "What sluice's own answers tell the client."),
    custom_key("error_pages", [](const void* s) { return error_pages_text(static_cast<const S*>(s)->error_pages); },
               "Bodies of sluice's own answers, by status or class."),
};

const KeySpec tls_rows[] = {
    custom_key("listen", [](const void* t) { return addresses_text(static_cast<const T*>(t)->listen); },
               "Where clients connect with TLS."),
    custom_key("certificates", nullptr, "PEM certificates and keys, chosen by SNI."),
    choice_key<&T::min_tls13>("min_version", "TLS version", tls_versions, "Lowest TLS version accepted."),
    string_key<&T::ciphers>("ciphers", "TLS 1.2 cipher list.").rule([](const void* t) {
      return tls::check_cipher_list(static_cast<const T*>(t)->ciphers).value_or("");
    }),
    bool_key<&T::proxy_protocol>("proxy_protocol", "A PROXY protocol header comes before the TLS handshake."),
};

constexpr std::array<std::string_view, 2> certificate_keys{"cert", "key"};

void read_certificates(Reader& r, const toml::node& node, const std::string& path,
                       std::vector<CertificateConfig>& out) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    r.type_error(node, path, "an array of { cert = \"FILE\", key = \"FILE\" } tables");
    return;
  }
  if (array->empty()) r.error(node, path, "at least one certificate is required");
  for (std::size_t i = 0; i < array->size(); ++i) {
    const std::string item_path = index_path(path, i);
    const toml::table* table = array->get(i)->as_table();
    if (table == nullptr) {
      r.type_error(*array->get(i), item_path, "a table like { cert = \"FILE\", key = \"FILE\" }");
      continue;
    }
    r.check_keys(*table, item_path, WordList(certificate_keys));
    CertificateConfig c;
    c.where = location_of(*table);
    const bool has_cert = r.require(*table, "cert", item_path, "the PEM certificate chain file");
    const bool has_key = r.require(*table, "key", item_path, "the PEM private key file");
    const toml::node* cert = has_cert ? r.take_string(*table, "cert", item_path + ".cert", c.cert) : nullptr;
    const toml::node* key = has_key ? r.take_string(*table, "key", item_path + ".key", c.key) : nullptr;
    r.note(*table, "cert", item_path + ".cert", toml_string(c.cert));
    r.note(*table, "key", item_path + ".key", toml_string(c.key));
    if (cert != nullptr && key != nullptr) r.check_key_pair(*cert, *key, item_path, "cert", "key", c.cert, c.key);
    out.push_back(std::move(c));
  }
}

// [[server.tls]]: listen addresses (claimed like plain ones), certificates loaded and checked
// here so that a bad file is an error at its line, at start-up and at every reload.
void read_tls_listeners(Reader& r, const toml::table& server, std::vector<TlsListenerConfig>& out) {
  const toml::node* node = server.get("tls");
  if (node == nullptr) return;
  const toml::array* array = node->as_array();
  if (array == nullptr) {
    r.type_error(*node, "server.tls", "an array of tables ([[server.tls]])");
    return;
  }
  for (std::size_t i = 0; i < array->size(); ++i) {
    const std::string path = index_path("server.tls", i);
    const toml::table* table = array->get(i)->as_table();
    if (table == nullptr) {
      r.type_error(*array->get(i), path, "a table");
      continue;
    }
    TlsListenerConfig tls;
    tls.where = location_of(*table);
    r.walk(*table, path, tls_rows, &tls);
    if (r.require(*table, "listen", path, "the addresses to accept TLS on")) {
      if (auto addresses = r.read_listen_addresses(*table->get("listen"), path + ".listen", false))
        tls.listen = std::move(*addresses);
    }
    r.record(*table, path, tls_rows, &tls);
    if (r.require(*table, "certificates", path, "at least one { cert, key } pair"))
      read_certificates(r, *table->get("certificates"), path + ".certificates", tls.certificates);
    out.push_back(std::move(tls));
  }
}

void check_edge(Reader& r, const toml::table& server, const ServerSection& out) {
  const bool any_proxy_listener =
      out.proxy_protocol || std::any_of(out.tls.begin(), out.tls.end(), [](const auto& t) { return t.proxy_protocol; });
  // Without a trusted peer every connection would be refused: surely not what was meant.
  if (any_proxy_listener && out.trusted_proxies.empty()) {
    const toml::node* at = server.get("proxy_protocol");
    r.error(at != nullptr ? at->source() : server.source(), "server.trusted_proxies",
            "proxy_protocol is on but trusted_proxies is empty: every connection would be "
            "refused; list the balancers' addresses, e.g. [\"10.0.0.0/8\"]");
  }
}

}  // namespace server_section

const KeyTable server_table = server_section::server_rows;
const KeyTable tls_listener_table = server_section::tls_rows;

void read_server(Reader& r, const toml::table& root, ServerSection& out) {
  using namespace server_section;
  const toml::table& table = r.section_or_empty(root, "server");
  const Read read = r.walk(table, "server", server_rows, &out);
  if (const toml::node* node = read["listen"]) {
    // Empty only when TLS listeners take the traffic.
    if (auto addresses = r.read_listen_addresses(*node, "server.listen", table.contains("tls")))
      out.listen = std::move(*addresses);
  }
  r.read_cidrs(table, "trusted_proxies", "server.trusted_proxies", out.trusted_proxies);
  r.read_error_pages(table, "server.error_pages", out.error_pages);
  // Left out, the URI limit follows a smaller head limit.
  if (!table.contains("max_uri_bytes")) out.max_uri_bytes = std::min(out.max_uri_bytes, out.max_header_bytes);
  r.record(table, "server", server_rows, &out);
  read_tls_listeners(r, table, out.tls);
  // The default listener is claimed too, so that the admin port cannot collide with it.
  if (read["listen"] == nullptr) {
    for (std::size_t i = 0; i < out.listen.size(); ++i)
      r.claim_listener(out.listen[i], table.source(), index_path("server.listen", i), true);
  }
  check_edge(r, table, out);
}

}  // namespace sluice::config
