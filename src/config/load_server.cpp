// [server] and [[server.tls]]: the client side (docs/configuration.md).
#include <algorithm>

#include "reader.hpp"
#include "sluice/config/units.hpp"
#include "sluice/tls/context.hpp"
#include "sluice/tls/ocsp.hpp"

namespace sluice::config {

namespace server_section {

using S = ServerSection;
using T = TlsListenerConfig;

// The bounds below are documented in docs/configuration.md (generated from these tables).
constexpr std::uint64_t no_limit = std::numeric_limits<std::uint64_t>::max();
constexpr std::array<std::string_view, 2> forwarded_words{"off", "add"};
constexpr std::array<std::string_view, 2> tls_versions{"1.2", "1.3"};

using C = CertificateConfig;

const KeySpec certificate_rows[] = {
    string_key<&C::cert>("cert", "The PEM certificate chain file.").needed("the PEM certificate chain file"),
    string_key<&C::key>("key", "The PEM private key file.").needed("the PEM private key file"),
    string_key<&C::ocsp_responder>("ocsp_responder", "OCSP responder URL instead of the certificate's.")
        .rule([](const void* c) -> std::string {
          const auto& url = static_cast<const C*>(c)->ocsp_responder;
          std::string why;
          if (url.empty() || tls::ocsp::parse_http_url(url, &why)) return {};
          return "'" + url + "' " + why;
        }),
};

void read_certificates(Reader& r, const toml::node& node, const std::string& path, std::vector<C>& out) {
  if (const auto* array = node.as_array(); array != nullptr && array->empty())
    r.error(node, path, "at least one certificate is required");
  read_tables(r, node, path, "an array of { cert = \"FILE\", key = \"FILE\" } tables",
              "a table like { cert = \"FILE\", key = \"FILE\" }", [&](const toml::table& table, const std::string& p) {
                C c;
                c.where = location_of(table);
                const Read read = r.walk(table, p, certificate_rows, &c);
                r.record(table, p, certificate_rows, &c);
                r.check_key_pair<&C::cert, &C::key>(read, c.cert, c.key);
                out.push_back(std::move(c));
              });
}

// Listen addresses, each claimed (two sockets cannot bind one address).
template <bool EmptyAllowed>
void read_listen(Reader& r, const toml::node& node, const std::string& path, std::vector<HostPort>& out) {
  if (auto addresses = r.read_listen_addresses(node, path, EmptyAllowed)) out = std::move(*addresses);
}

using A = AcmeConfig;

const KeySpec acme_rows[] = {
    strings_key<&A::domains>("domains", "The names the certificate is ordered for.")
        .restart()
        .needed("the names to order a certificate for")
        .rule([](const void* a) -> std::string {
          return static_cast<const A*>(a)->domains.empty() ? "at least one domain is required" : "";
        }),
    string_key<&A::directory>("directory", "The ACME CA's directory URL (https://).")
        .restart()
        .needed("the CA's directory URL")
        .rule([](const void* a) -> std::string {
          const auto& url = static_cast<const A*>(a)->directory;
          return url.starts_with("https://") ? "" : "must be an https:// URL, got '" + url + "'";
        }),
    string_key<&A::email>("email", "The ACME account's contact address.").restart(),
    choice_key<&A::challenge>("challenge", "ACME challenge", "How the domains are proven: tls-alpn-01, http-01.")
        .restart(),
    string_key<&A::ca_file>("ca_file", "PEM CAs of the directory's HTTPS certificate; \"\" = the system's.")
        .restart()
        .rule([](const void* a) { return tls::check_ca_file(static_cast<const A*>(a)->ca_file).value_or(""); }),
};

void read_acme(Reader& r, const toml::node& node, const std::string& path, std::optional<A>& out) {
  const toml::table* table = r.table_at(&node, path);
  if (table == nullptr) return;
  A acme;
  acme.where = location_of(*table);
  r.walk(*table, path, acme_rows, &acme);
  r.record(*table, path, acme_rows, &acme);
  out = std::move(acme);
}

std::string alpn_text(const std::vector<Alpn>& alpn) {
  std::vector<std::string> items;
  for (const Alpn a : alpn) items.push_back(toml_string(name_of(a)));
  return "[" + join_strings(items) + "]";
}

// alpn = ["h2", "http/1.1"]: the protocols offered, preferred first; http/1.1 must be among them
// (a client without ALPN speaks it).
void read_alpn(Reader& r, const toml::node& node, const std::string& p, std::vector<Alpn>& out) {
  std::vector<std::string> words;
  if (!r.take_strings(node, p, words)) return;
  std::vector<Alpn> order;
  bool good = true;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const auto* item = node.as_array()->get(i);
    const auto a = from_name<Alpn>(words[i]);
    if (!a) {
      r.error(*item, index_path(p, i), unknown_message("ALPN protocol", words[i], Words<Alpn>::words));
      good = false;
    } else if (std::find(order.begin(), order.end(), *a) != order.end()) {
      r.error(*item, index_path(p, i), "'" + words[i] + "' is listed twice");
      good = false;
    } else {
      order.push_back(*a);
    }
  }
  if (good && std::find(order.begin(), order.end(), Alpn::http11) == order.end()) {
    r.error(node, p, "must include \"http/1.1\" (clients without ALPN speak it); [\"http/1.1\"] turns HTTP/2 off");
    good = false;
  }
  if (good) out = std::move(order);
}

const KeySpec tls_rows[] = {
    value_key<&T::listen, read_listen<false>, addresses_text>("listen", "Where clients connect with TLS.")
        .docs("array of addresses")
        .needed("the addresses to accept TLS on"),
    value_key<&T::certificates, read_certificates>("certificates", "PEM certificates and keys, chosen by SNI.")
        .docs("array of tables", "", "required unless acme"),
    choice_key<&T::min_tls13>("min_version", "TLS version", tls_versions, "Lowest TLS version accepted."),
    string_key<&T::ciphers>("ciphers", "TLS 1.2 cipher list.").rule([](const void* t) {
      return tls::check_cipher_list(static_cast<const T*>(t)->ciphers).value_or("");
    }),
    bool_key<&T::proxy_protocol>("proxy_protocol", "A PROXY protocol header comes before the TLS handshake."),
    string_key<&T::client_ca_file>("client_ca_file", "PEM CAs a client certificate must chain to.")
        .rule([](const void* t) { return tls::check_ca_file(static_cast<const T*>(t)->client_ca_file).value_or(""); }),
    choice_key<&T::verify_client>("verify_client", "verify_client mode", "Ask clients for a certificate: off, optional, required.")
        .rule([](const void* t) -> std::string {
          const auto& tls = *static_cast<const T*>(t);
          if (tls.verify_client == tls::VerifyClient::off || !tls.client_ca_file.empty()) return {};
          return "verify_client = \"" + std::string(name_of(tls.verify_client)) +
                 "\" needs client_ca_file (the CAs client certificates must chain to)";
        }),
    string_key<&T::session_ticket_key_file>("session_ticket_key_file", "80-byte session ticket keys; the first encrypts.")
        .rule([](const void* t) {
          return tls::check_ticket_key_file(static_cast<const T*>(t)->session_ticket_key_file).value_or("");
        }),
    bool_key<&T::ocsp_stapling>("ocsp_stapling", "Staple the OCSP status of certificates with a responder."),
    value_key<&T::acme, read_acme, [](const std::optional<A>& a) { return a ? "on" : "off"; }>(
        "acme", "A certificate from an ACME CA ([[server.tls]] acme = { ... }).")
        .restart()
        .docs("table"),
    value_key<&T::alpn, read_alpn, alpn_text>("alpn", "Protocols offered by ALPN, preferred first (h2, http/1.1).")
        .docs("array of strings"),
};

// [[server.tls]]: listen addresses (claimed like plain ones), certificates loaded and checked
// here so that a bad file is an error at its line, at start-up and at every reload.
void read_tls_listeners(Reader& r, const toml::node& node, const std::string& path, std::vector<T>& out) {
  read_tables(r, node, path, "an array of tables ([[server.tls]])", "a table",
              [&](const toml::table& table, const std::string& p) {
                T tls;
                tls.where = location_of(table);
                const Read read = r.walk(table, p, tls_rows, &tls);
                // A listener needs a certificate from somewhere: its files, or its ACME CA.
                if (!read.present<&T::certificates>() && !read.present<&T::acme>())
                  r.error(table, read.path<&T::certificates>(),
                          "required key is missing (at least one { cert, key } pair, or acme = { ... })");
                r.record(table, p, tls_rows, &tls);
                out.push_back(std::move(tls));
              });
}

const KeySpec server_rows[] = {
    value_key<&S::listen, read_listen<true>, addresses_text>("listen", "Where clients connect with plain HTTP.")
        .docs("array of addresses"),
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
    value_key<&S::tls, read_tls_listeners>("tls", "TLS listeners ([[server.tls]])."),
    // Edge (docs/edge.md), all live: a session reads them from the snapshot current when it
    // starts (proxy_protocol, trusted_proxies) or when its request is routed (the rest).
    bool_key<&S::proxy_protocol>("proxy_protocol", "The plain listeners expect a PROXY protocol header."),
    value_key<&S::trusted_proxies, parse_cidrs, cidrs_text>("trusted_proxies",
                                                            "Balancers whose PROXY header and X-Forwarded-For are believed.")
        .docs("array of strings"),
    choice_key<&S::forwarded_header>("forwarded_header", "forwarded_header mode", forwarded_words,
                                     "add: also send RFC 7239 Forwarded."),
    choice_key<&S::error_detail>("error_detail", "", "What sluice's own answers tell the client."),
    value_key<&S::error_pages, parse_error_pages, error_pages_text>("error_pages",
                                                                    "Bodies of sluice's own answers, by status or class."),
    // HTTP/2 (docs/http2.md): read when a connection starts.
    bool_key<&S::h2c>("h2c", "Plain listeners also take HTTP/2 with prior knowledge."),
    integer_key<&S::http2_max_concurrent_streams>("http2_max_concurrent_streams", 1, 65536,
                                                  "Open HTTP/2 streams per connection (SETTINGS)."),
    integer_key<&S::http2_initial_window_bytes>("http2_initial_window_bytes", 1024, 2147483647,
                                                "HTTP/2 stream flow-control window (SETTINGS)."),
    integer_key<&S::http2_header_table_bytes>("http2_header_table_bytes", 0, 65536,
                                              "HPACK table a client may use for its request heads (SETTINGS)."),
    integer_key<&S::http2_max_requests>("http2_max_requests", 0, 4294967295,
                                        "Requests per HTTP/2 connection, then GOAWAY (0: no limit)."),
    integer_key<&S::http2_max_early_resets>("http2_max_early_resets", 1, 1000000,
                                            "Streams a client may reset before their answer (then GOAWAY)."),
    integer_key<&S::http2_max_glitches>("http2_max_glitches", 1, 1000000,
                                        "Frames without a request a connection may send beyond one a second (then GOAWAY)."),
};

void check_edge(Reader& r, const Read& read, const ServerSection& out) {
  const bool any_proxy_listener =
      out.proxy_protocol || std::any_of(out.tls.begin(), out.tls.end(), [](const auto& t) { return t.proxy_protocol; });
  // Without a trusted peer every connection would be refused: surely not what was meant.
  if (any_proxy_listener && out.trusted_proxies.empty()) {
    r.error(read.where<&S::proxy_protocol>(), read.path<&S::trusted_proxies>(),
            "proxy_protocol is on but trusted_proxies is empty: every connection would be "
            "refused; list the balancers' addresses, e.g. [\"10.0.0.0/8\"]");
  }
}

}  // namespace server_section

const KeyTable server_table = server_section::server_rows;
const KeyTable tls_listener_table = server_section::tls_rows;
const KeyTable acme_listener_table = server_section::acme_rows;

void read_server(Reader& r, const toml::node& node, const std::string& path, ServerSection& out) {
  using namespace server_section;
  const toml::table& table = r.table_or_empty(&node, path);
  const Read read = r.walk(table, path, server_rows, &out);
  // Empty only when TLS listeners take the traffic.
  if (const auto* listen = read.at<&S::listen>(); listen != nullptr && out.listen.empty() && !read.present<&S::tls>())
    r.error(*listen, read.path<&S::listen>(), "at least one listen address is required");
  // Left out, the URI limit follows a smaller head limit.
  if (!read.present<&S::max_uri_bytes>()) out.max_uri_bytes = std::min(out.max_uri_bytes, out.max_header_bytes);
  r.record(table, path, server_rows, &out);
  // The default listener is claimed too, so that the admin port cannot collide with it.
  if (!read.present<&S::listen>()) {
    for (std::size_t i = 0; i < out.listen.size(); ++i)
      r.claim_listener(out.listen[i], table.source(), index_path(read.path<&S::listen>(), i), true);
  }
  check_edge(r, read, out);
}

}  // namespace sluice::config
