#pragma once
// The typed configuration: what `conf/*.toml` says, with every default in one place (here).
// A Config is built once by the loader, validated, and then only read: the runtime publishes it
// as an immutable snapshot (shared_ptr<const Config>) that any thread may read without locks.
#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// Policy values are parsed once, by the loader, into the types their users read (statuses, the
// failure set); nothing downstream re-parses a string.
#include "sluice/compress/eligibility.hpp"
#include "sluice/config/expect_status.hpp"
#include "sluice/config/fail_on.hpp"
#include "sluice/config/idempotency.hpp"
#include "sluice/core/cidr.hpp"
#include "sluice/tls/acme_challenge_kind.hpp"
#include "sluice/tls/verify_client.hpp"

namespace sluice::config {

using Duration = std::chrono::milliseconds;

// The words of a closed set a key takes, in the order of its enum (specialized beside each
// enum): the loader parses them once, `name_of` prints them; nothing else handles the strings.
template <class E>
struct Words;

template <class E>
constexpr std::string_view name_of(E value) {
  return Words<E>::words[static_cast<std::size_t>(value)];
}

// The value a word names; nullopt for a word of no value (the loader's own tables do the
// parsing of files; this is for command lines and tests).
template <class E>
constexpr std::optional<E> from_name(std::string_view word) {
  for (std::size_t i = 0; i < Words<E>::words.size(); ++i)
    if (Words<E>::words[i] == word) return static_cast<E>(i);
  return std::nullopt;
}

template <>
struct Words<idempotency::Mode> {
  static constexpr std::array<std::string_view, 3> words{"off", "collapse", "replay"};
};
template <>
struct Words<idempotency::OnStoreError> {
  static constexpr std::array<std::string_view, 2> words{"forward", "reject"};
};

inline constexpr std::uint64_t KiB = 1024;
inline constexpr std::uint64_t MiB = 1024 * KiB;
inline constexpr std::uint64_t GiB = 1024 * MiB;

// Defaults that another module's own policy types start from too (health::ActivePolicy,
// health::PassivePolicy): written once, here.
namespace defaults {
inline constexpr std::uint32_t rise = 2;
inline constexpr std::uint32_t fall = 3;
inline constexpr std::uint32_t max_fails = 3;
inline constexpr Duration fail_timeout = std::chrono::seconds(10);
inline constexpr Duration max_ejection_time = std::chrono::seconds(300);
inline constexpr std::array<std::string_view, 6> fail_on{"connect", "timeout", "reset", "502", "503", "504"};
}  // namespace defaults

// Where a value came from, for error messages and `sluice check`.
struct SourceLocation {
  int line = 0;
  int column = 0;
};

// "host:port" or "[v6]:port". host is kept as written (without brackets); it is resolved when
// the runtime builds sockets, so a name like "localhost" is allowed.
struct HostPort {
  std::string host;
  std::uint16_t port = 0;
  std::string to_string() const;  // back to "host:port" / "[v6]:port"
  // Where a client on this host connects to reach a listener on this address: a wildcard
  // ("0.0.0.0", "::") is reached over loopback.
  HostPort reachable() const;
};

// A protocol a TLS listener offers through ALPN: "h2" (HTTP/2) or "http/1.1".
enum class Alpn : std::uint8_t { h2, http11 };
template <>
struct Words<Alpn> {
  static constexpr std::array<std::string_view, 2> words{"h2", "http/1.1"};
};

// One certificate of a TLS listener: a PEM file with the certificate and its chain, and its key.
struct CertificateConfig {
  std::string cert;
  std::string key;
  std::string ocsp_responder;  // http:// URL asked instead of the certificate's AIA; "" = AIA
  SourceLocation where;
};

// [[server.tls]] acme = { ... }: the listener's certificate obtained from an ACME CA (RFC 8555,
// docs/tls.md) instead of, or beside, `certificates`.
struct AcmeConfig {
  std::vector<std::string> domains;  // the names of the one certificate ordered
  std::string directory;             // the CA's directory URL (https)
  std::string email;                 // the account's contact; "" = none
  tls::AcmeChallenge challenge = tls::AcmeChallenge::tls_alpn_01;
  std::string ca_file;  // the CAs the directory's HTTPS certificate chains to; "" = the system's
  SourceLocation where;
};
template <>
struct Words<tls::AcmeChallenge> {
  static constexpr std::array<std::string_view, 2> words{"tls-alpn-01", "http-01"};
};

// [acme]: where the account key and issued certificates are kept.
struct AcmeSection {
  std::string storage = "/var/lib/sluice/acme";
};

// [[server.tls]]: listeners that terminate TLS (see docs/tls.md).
struct TlsListenerConfig {
  std::vector<HostPort> listen;
  // Chosen by SNI (exact names, then wildcards); the first is the default.
  std::vector<CertificateConfig> certificates;
  bool min_tls13 = false;  // min_version = "1.2" (default) | "1.3"
  std::string ciphers;     // TLS 1.2 cipher list; "" = tls::default_ciphers
  bool proxy_protocol = false;  // a PROXY protocol header comes before the TLS handshake
  // Client certificates (docs/tls.md): the CAs a client's certificate must chain to, and whether
  // one is asked for. verify_client other than "off" needs client_ca_file.
  std::string client_ca_file;
  tls::VerifyClient verify_client = tls::VerifyClient::off;
  // 80-byte session ticket keys (docs/tls.md); "" = OpenSSL's random keys, new at each reload.
  std::string session_ticket_key_file;
  // OCSP stapling (docs/tls.md) of the certificates that name a responder.
  bool ocsp_stapling = true;
  std::optional<AcmeConfig> acme;  // a certificate from an ACME CA; nullopt = none
  // ALPN (RFC 7301): the protocols offered to clients, the server's preference first. Without
  // Alpn::h2 the listener speaks HTTP/1.1 only (docs/http2.md).
  std::vector<Alpn> alpn{Alpn::h2, Alpn::http11};
  SourceLocation where;
};
template <>
struct Words<tls::VerifyClient> {
  static constexpr std::array<std::string_view, 3> words{"off", "optional", "required"};
};

// What sluice's own answers (errors it makes, not an origin's) tell the client: `status`, the
// status line and a bare body ("503 Service Unavailable"); `full`, also Sluice-Error with the
// reason, Sluice-Attempts, and the reason and the upstream's name in the body. The access log and
// the metrics keep the full detail either way.
enum class ErrorDetail : std::uint8_t { status, full };
template <>
struct Words<ErrorDetail> {
  static constexpr std::array<std::string_view, 2> words{"status", "full"};
};

// error_pages = { 502 = "FILE", "5xx" = "FILE" }: the body of sluice's own answers with that
// status (or of its class), read once at load.
struct ErrorPage {
  unsigned status = 0;  // 100..599; or 1..5 for a whole class ("5xx")
  std::string file;
  std::string body;
  std::string_view content_type;  // static storage, from the file's extension
};
struct ErrorPages {
  std::vector<ErrorPage> pages;
  // The page of `status`, else of its class; nullptr: none.
  const ErrorPage* find(unsigned status) const noexcept;
  bool empty() const noexcept { return pages.empty(); }
};

struct ServerSection {
  // Plain HTTP listeners. May be empty when there are TLS listeners.
  std::vector<HostPort> listen{{"127.0.0.1", 8080}};
  std::vector<TlsListenerConfig> tls;
  unsigned workers = 0;  // 0 = one per core
  // `workers`, with 0 resolved to the number of cores.
  unsigned worker_count() const;
  Duration header_timeout{std::chrono::seconds(10)};
  Duration idle_timeout{std::chrono::seconds(60)};
  Duration shutdown_timeout{std::chrono::seconds(30)};
  std::uint64_t max_header_bytes = 16 * KiB;
  std::uint64_t max_uri_bytes = 8 * KiB;     // request-target longer than this: 414
  std::uint64_t max_body_bytes = 100 * MiB;  // 0 = unlimited
  std::uint32_t max_connections = 10000;
  // After SIGTERM: /readyz fails at once, listeners keep accepting this long (so that load
  // balancers in front see the failing probe first), then shutdown_timeout begins.
  Duration shutdown_delay{0};
  bool watch_config = false;  // reload when the config file changes, as on SIGHUP
  // The kernel hands a client connection over once its first bytes came (TCP_DEFER_ACCEPT; a
  // silent one after about a second): see runtime/listeners.hpp.
  bool defer_accept = true;
  // Upgrade tunnels (WebSocket) still open when their server is drained or the config reloaded
  // are closed this long after (like HAProxy's hard-stop-after / nginx's worker_shutdown_timeout).
  Duration tunnel_drain_timeout{std::chrono::minutes(10)};
  // systemd readiness (READY=1) waits for the first probe of every health-checked server, at
  // most this long after the listeners are open. 0 = ready as soon as the listeners are.
  Duration health_ready_timeout{std::chrono::seconds(10)};
  // Drains, health and slow start kept across restarts (runtime/state_file); "" = none.
  std::string state_file;
  // Edge (docs/edge.md): the plain listeners expect a PROXY protocol header, accepted only from
  // trusted_proxies, whose addresses also make X-Forwarded-For believed (real_ip_recursive).
  bool proxy_protocol = false;
  CidrSet trusted_proxies;
  bool forwarded_header = false;  // forwarded_header = "off" | "add" (RFC 7239 Forwarded)
  ErrorDetail error_detail = ErrorDetail::status;
  ErrorPages error_pages;
  // HTTP/2 (docs/http2.md): h2c with prior knowledge on the plain listeners (TLS listeners offer
  // h2 through ALPN), and the per-connection limits announced in SETTINGS and enforced.
  bool h2c = false;
  std::uint32_t http2_max_concurrent_streams = 128;
  std::uint32_t http2_initial_window_bytes = 65535;  // RFC 9113 §6.9.2's default
  // The HPACK dynamic table a client may make sluice keep for its request heads
  // (SETTINGS_HEADER_TABLE_SIZE; RFC 9113 §6.5.2's default).
  std::uint32_t http2_header_table_bytes = 4096;
  // Requests per connection: at the last one, GOAWAY names it as the last stream taken, the
  // streams open finish, and the client goes on over a new connection. 0: no limit (as HAProxy
  // and Envoy; nginx's keepalive_requests is 1000).
  std::uint32_t http2_max_requests = 0;
  // A client that resets this many streams before their answer (Rapid Reset, CVE-2023-44487)
  // has its connection closed with GOAWAY(ENHANCE_YOUR_CALM).
  std::uint32_t http2_max_early_resets = 100;
  // Frames that make sluice work without bringing a request (PING, SETTINGS after the first,
  // PRIORITY, empty DATA, a frame nghttp2 refused): a connection that has sent this many more
  // than one a second gets GOAWAY(ENHANCE_YOUR_CALM) (HAProxy's glitches, Envoy's flood limits).
  std::uint32_t http2_max_glitches = 1000;
};

enum class AccessLogFormat : std::uint8_t { text, json, off };
enum class ErrorLogFormat : std::uint8_t { text, json };
enum class LogLevel : std::uint8_t { trace, debug, info, warn, error };
template <>
struct Words<AccessLogFormat> {
  static constexpr std::array<std::string_view, 3> words{"text", "json", "off"};
};
template <>
struct Words<ErrorLogFormat> {
  static constexpr std::array<std::string_view, 2> words{"text", "json"};
};
// spdlog's own names for its levels (spdlog::level::from_str reads them).
template <>
struct Words<LogLevel> {
  static constexpr std::array<std::string_view, 5> words{"trace", "debug", "info", "warn", "error"};
};

struct LogSection {
  LogLevel level = LogLevel::info;
  AccessLogFormat access = AccessLogFormat::text;
  // "" = the standard stream (stdout for the access log, stderr for the error log). Reopened on
  // SIGUSR1 and POST /api/logs/reopen (logrotate); a reload that changes one opens the new file.
  std::string access_file;
  std::string error_file;
  ErrorLogFormat error_format = ErrorLogFormat::text;
};

struct AdminSection {
  bool enabled = false;  // no [admin] section = no admin listener
  HostPort listen{"127.0.0.1", 9901};
  // File holding the bearer token every POST must present; "" = POSTs are open (allowed only on
  // a loopback listen address). Read by the runtime (admin::read_token_file), not the loader.
  std::string token_file;
  // Host names (lowercase, no port) accepted in the Host header besides localhost, IP literals and
  // the listen host: the DNS-rebinding defence (docs/admin.md).
  std::vector<std::string> allowed_hosts;
};

// `hash_key`: which part of a request a `hash` upstream balances on (HashKey extracts it).
struct HashKeySpec {
  enum class Kind : std::uint8_t { client_ip, uri, header, cookie, query };
  Kind kind = Kind::client_ip;
  std::string name;  // the header, cookie or query parameter

  // "client_ip", "uri", "header:NAME", "cookie:NAME", "query:NAME"; nullopt on anything else.
  static std::optional<HashKeySpec> parse(std::string_view text);
  std::string to_string() const;
  bool operator==(const HashKeySpec&) const = default;
};

// A route's rate_limit = { rate = "100/s", burst = 200, key = "client_ip" | "header:NAME" }.
struct RateLimitConfig {
  std::uint64_t count = 1;             // `count` requests per `period` ...
  Duration period{std::chrono::seconds(1)};
  std::uint32_t burst = 1;             // ... with this many at once (default: count, at least 1)
  HashKeySpec key;                     // client_ip | header:NAME
  std::uint32_t max_keys = 65536;      // keys remembered (LRU eviction of the least recent)
  bool operator==(const RateLimitConfig&) const = default;
};

// request_headers / response_headers = { set = {...}, add = {...}, remove = [...] } on a route or
// an upstream (docs/edge.md). Values are templates (http::Template), checked by the loader.
struct HeaderRulesConfig {
  std::vector<std::pair<std::string, std::string>> set;  // name, value; in file order
  std::vector<std::pair<std::string, std::string>> add;
  std::vector<std::string> remove;
  bool empty() const { return set.empty() && add.empty() && remove.empty(); }
};

// A route's `return = { status, location, body, content_type }`: answered without an upstream.
struct ReturnConfig {
  unsigned status = 200;
  std::string location;  // required for 3xx
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
};

// [reload]: after a reload, sluice watches the new config's traffic this long and swaps the
// previous config back on a clear breach (runtime/reload_watch.hpp, docs/operations.md).
struct ReloadSection {
  Duration watch{std::chrono::seconds(30)};  // 0 = reloads are not watched
  // The failed share (origin 5xx, sluice's 502/503/504) breaches when it is at least
  // failed_percent AND at least failed_factor times the share of the window before the reload.
  double failed_percent = 5.0;
  double failed_factor = 3.0;
  // Fewer answers than this over the watch: too little traffic to judge the failed share.
  std::uint32_t min_requests = 100;
  // An upstream whose share of servers up falls by more than this percentage breaches.
  std::uint32_t up_lost_percent = 50;
};

// [fleet]: several instances sharing drains through Redis (runtime/fleet.hpp, docs/fleet.md).
// No section = no fleet: the instance is on its own, as before.
struct FleetSection {
  bool enabled = false;  // the section's presence is the switch
  std::string redis;     // "redis://HOST:PORT/DB" or "unix:/PATH", as written
  // Parsed from `redis`: a TCP address (host, port, db) or a Unix socket path.
  std::string host;
  std::uint16_t port = 6379;
  unsigned db = 0;
  std::string unix_path;  // not empty: the Unix socket, and host/port are unused
  std::string name;       // "" = the host name and the first listen address
  Duration lease_ttl{std::chrono::seconds(10)};
  // How often the fleet's session ticket keys are replaced by a new one (runtime/fleet_tickets).
  Duration ticket_key_rotation{std::chrono::hours(12)};
  bool share_ejections = false;  // a passive ejection by one instance applies on all
};

// [dns]: the resolver of `resolve` servers and `discover` (discovery/, docs/discovery.md).
struct DnsSection {
  std::vector<HostPort> servers;  // name servers; empty = those of /etc/resolv.conf
  Duration timeout{std::chrono::seconds(2)};  // per try, per name server
  std::uint32_t attempts = 2;
  Duration min_ttl{std::chrono::seconds(1)};  // a record's TTL is clamped to [min_ttl, max_ttl]
  Duration max_ttl{std::chrono::seconds(300)};
  // After a failed resolution (timeout, SERVFAIL, NXDOMAIN, refused) the last good answer is kept
  // this long; then its servers are removed.
  Duration stale_ttl{std::chrono::hours(1)};
  bool allow_empty = false;  // apply an answer with no records (else it counts as a failure)
};

// A route's name in logs, metrics and `check --diff`: its host ("*" = any) and path_prefix, as in
// "*/api/" or "shop.example.com/".
std::string route_label(std::string_view host, std::string_view path_prefix);

// `compress = { codings, types, min_bytes, level }` (docs/compression.md): the responses compressed
// and how. nullopt = none: compression is off unless configured, as in nginx, HAProxy and Envoy
// (each compressed response costs CPU and an encoder's memory, and the client gets other bytes).
using CompressConfig = std::optional<compress::Policy>;

struct RouteConfig {
  std::string host;               // "" = any; exact or "*.example.com"
  std::string path_prefix = "/";  // longest prefix wins
  std::string upstream;           // "" only with `answer`
  // Admission (docs/edge.md): deny, then allow (when not empty), then the rate limit.
  CidrSet allow;
  CidrSet deny;
  std::optional<RateLimitConfig> rate_limit;
  HeaderRulesConfig request_headers;   // applied after the upstream's
  HeaderRulesConfig response_headers;
  bool strip_prefix = false;           // path_prefix removed ("/" kept) before forwarding
  std::string rewrite_prefix;          // "" = none; else replaces path_prefix
  std::optional<ReturnConfig> answer;  // `return`
  ErrorPages error_pages;              // before [server] error_pages for this route's answers
  // nullopt: the upstream's `compress`; else this route's, replacing it (`compress = false`: none).
  std::optional<CompressConfig> compress;
  // Only clients whose TLS certificate verified ([[server.tls]] verify_client); others get 403.
  bool require_client_cert = false;
  SourceLocation where;
};

struct ServerConfig {
  HostPort address;
  std::string name;  // "" = identity is the address
  std::uint32_t weight = 1;
  bool backup = false;         // used only while no primary server is available
  std::uint32_t max_conns = 0; // in-flight requests to this server across workers; 0 = unlimited
  bool drain = false;          // no new requests; in-flight ones finish
  bool tls = false;            // the upstream's `tls`, or an "https://" address
  // `resolve = true`: the address is a DNS name whose every A/AAAA record is a server, re-resolved
  // at the records' TTL (clamped to [dns] min_ttl..max_ttl) or every resolve_interval when set.
  bool resolve = false;
  Duration resolve_interval{0};  // 0 = the TTL
  // Where a server of a snapshot came from: "" = the file; "dns" (a `resolve` name) or "srv"
  // (`discover`) with `source` the name asked. Set by discovery/, never by the loader.
  std::string origin;
  std::string source;
  SourceLocation where;

  // Stable identity: survives reordering and reloads; keys health state and hashing.
  std::string identity() const { return name.empty() ? address.to_string() : name; }
};

enum class ProbeMethod : std::uint8_t { get, head };
// What probes speak: an HTTP/1.1 request to `path`, or the gRPC health checking protocol
// (grpc.health.v1.Health/Check over HTTP/2).
enum class ProbeProtocol : std::uint8_t { http, grpc };
template <>
struct Words<ProbeProtocol> {
  static constexpr std::array<std::string_view, 2> words{"http", "grpc"};
};
enum class InitialState : std::uint8_t { up, down };
template <>
struct Words<InitialState> {
  static constexpr std::array<std::string_view, 2> words{"up", "down"};
};
template <>
struct Words<ProbeMethod> {
  static constexpr std::array<std::string_view, 2> words{"GET", "HEAD"};
};

// [upstreams.NAME.health]: active probing. Absent = no active checks.
struct HealthCheckConfig {
  ProbeProtocol protocol = ProbeProtocol::http;
  std::string service;  // gRPC: the service asked about; "" = the server as a whole
  std::string path = "/health";
  ProbeMethod method = ProbeMethod::get;
  std::string host;            // Host header of probes; "" = the server's address
  std::uint16_t port = 0;      // probe another port; 0 = the server's port
  Duration interval{std::chrono::seconds(2)};
  Duration timeout{std::chrono::seconds(1)};  // < interval
  std::uint32_t rise = defaults::rise;
  std::uint32_t fall = defaults::fall;
  health::StatusMatcher expect_status = health::default_expect_status();  // "200,204,300-399"
  std::string expect_body;                // substring the body must contain; "" = any
  double jitter = 0.1;
  InitialState initial_state = InitialState::up;
};

// [upstreams.NAME.passive]: failures seen on live traffic. On by default (an absent section means
// these defaults, as nginx's max_fails=1 fail_timeout=10s is on with no configuration);
// max_fails = 0 turns passive ejection off.
struct PassiveConfig {
  std::uint32_t max_fails = defaults::max_fails;
  Duration fail_timeout = defaults::fail_timeout;
  Duration max_ejection_time = defaults::max_ejection_time;
  std::uint32_t max_ejected_percent = 50;
  health::FailOn fail_on = health::FailOn::of(defaults::fail_on);
};

// [upstreams.NAME.retry]
// retry.on's items for gRPC codes: "grpc:" and a code's name ("grpc:unavailable").
inline constexpr std::string_view grpc_item_prefix = "grpc:";

struct RetryConfig {
  std::uint32_t attempts = 2;  // total tries including the first; 1 = no retry
  // `on`: which failures may be retried. "connect" = any connect failure, "refused" = connection
  // refused, "reset" = the connection failed (or the answer was malformed), "timeout" = connect
  // or response timeout; plus status codes.
  bool on_connect = true;
  bool on_refused = true;
  bool on_reset = true;
  bool on_timeout = true;
  std::vector<unsigned> on_status{502, 503, 504};
  // gRPC status codes ("grpc:unavailable"), one bit per code 1..16: a trailers-only answer with one
  // of them is retried like a listed status, whatever the method (the operator vouches that the
  // service did nothing when it answers so). None by default.
  std::uint32_t on_grpc = 0;
  std::string idempotency_header = "Idempotency-Key";  // "" disables keyed retries
  Duration per_try_timeout{0};  // 0 = response_timeout
  Duration deadline{0};         // whole request across all tries; 0 = attempts x per-try timeout
  Duration backoff{25};
  Duration backoff_max{250};
  // Retry budget over a window (RetryBudget): retries <= budget x requests in the last
  // budget_window + budget_min_per_sec x budget_window.
  double budget = 0.2;
  Duration budget_window{std::chrono::seconds(10)};
  double budget_min_per_sec = 10;
  std::uint64_t buffer = 64 * KiB;  // request body kept for replay
};

// The `balance` values: the loader accepts these, balancer/registry makes one for each. Here,
// below balancer/, so that the loader needs no balancer code.
// One row per policy; the policy's file defines its factory (balancer/registry.hpp).
#define SLUICE_BALANCE_POLICIES(X) X(round_robin) X(weighted) X(least_conn) X(hash) X(p2c) X(least_time)
#define SLUICE_BALANCE_ENUMERATOR(name) name,
#define SLUICE_BALANCE_WORD(name) std::string_view(#name),
enum class Balance : std::uint8_t { SLUICE_BALANCE_POLICIES(SLUICE_BALANCE_ENUMERATOR) };
template <>
struct Words<Balance> {
  static constexpr std::array words{SLUICE_BALANCE_POLICIES(SLUICE_BALANCE_WORD)};
};

// What the servers of an upstream speak: HTTP/1.1, HTTP/2 over cleartext with prior knowledge
// (RFC 9113 §3.3), or HTTP/2 over TLS chosen by ALPN "h2".
enum class UpstreamProtocol : std::uint8_t { http1, h2c, h2 };
template <>
struct Words<UpstreamProtocol> {
  static constexpr std::array<std::string_view, 3> words{"http1", "h2c", "h2"};
};

struct UpstreamConfig {
  std::string name;
  Balance balance = Balance::round_robin;
  UpstreamProtocol protocol = UpstreamProtocol::http1;
  Duration connect_timeout{std::chrono::seconds(1)};
  Duration response_timeout{std::chrono::seconds(30)};  // last request byte sent -> first response byte
  // A request body being forwarded with no progress (no byte read from the client, none written
  // to the origin) for this long ends the attempt (nginx's proxy_send_timeout, client_body_timeout).
  Duration send_timeout{std::chrono::seconds(30)};
  std::uint32_t keepalive = 32;                          // idle pooled connections per server, per worker
  Duration keepalive_timeout{std::chrono::seconds(30)};
  // An Upgrade tunnel with no byte either way for this long is closed (HAProxy's `timeout tunnel`).
  Duration tunnel_idle_timeout{std::chrono::hours(1)};
  std::vector<ServerConfig> servers;
  std::optional<HealthCheckConfig> health;
  PassiveConfig passive;
  Duration slow_start{0};
  bool panic_when_all_down = false;  // when_all_down = "fail" | "panic"
  // Balancing (see docs/balancing.md).
  HashKeySpec hash_key;                // client_ip | uri | header:NAME | cookie:NAME | query:NAME
  double hash_balance_factor = 0;      // 0 = off
  // least_time: how fast answers lower a server's time-to-first-byte estimate (its EWMA's time
  // constant), and how long an estimate lasts without a sample.
  Duration decay{std::chrono::seconds(10)};
  std::uint32_t queue_size = 0;
  Duration queue_timeout{std::chrono::seconds(5)};
  RetryConfig retry;
  // [upstreams.NAME.idempotency]: Idempotency-Key requests collapsed and replayed.
  idempotency::Config idempotency;
  // TLS towards the servers (see docs/tls.md): `tls = true` for all of them, or "https://" on an
  // address for one.
  bool tls = false;
  bool tls_verify = true;
  std::string tls_ca_file;      // "" = the system's trusted CAs
  std::string tls_server_name;  // SNI and the name verified; "" = each server's host
  std::string tls_cert;         // client certificate (with tls_key), optional
  std::string tls_key;
  HeaderRulesConfig request_headers;  // before the route's (docs/edge.md)
  HeaderRulesConfig response_headers;
  // `discover = { srv = "_http._tcp.app.service.consul" }`: servers from SRV records (weight ->
  // weight, the lowest priority as primaries, higher ones as backup); "" = none.
  std::string discover_srv;
  Duration discover_interval{0};  // `discover.resolve_interval`; 0 = the TTL
  CompressConfig compress;        // absent = no response compressed
  // Any server from DNS (a `resolve` server or `discover`)?
  bool discovers() const {
    if (!discover_srv.empty()) return true;
    for (const auto& s : servers)
      if (s.resolve) return true;
    return false;
  }
  bool any_tls() const {
    for (const auto& s : servers)
      if (s.tls) return true;
    return tls;  // servers discovered later use the upstream's `tls`
  }
  SourceLocation where;
};

// How a change of a key takes effect on reload (docs/configuration.md lists each key's class).
// live: the reload applies it; restart: the reload refuses a file that changes it.
enum class Reload { live, restart };

// One key as the loader read it, with its effective value (the default when the file leaves it
// out) written as in TOML, and its reload class, declared where the loader reads the key. Every
// key is recorded except servers and routes, which `check --diff` compares by identity.
struct KeyValue {
  std::string path;   // "server.workers", "upstreams.app.retry.attempts"
  std::string value;  // "2", "\"GET\"", "10s", "[\"127.0.0.1:8080\"]"
  Reload reload = Reload::live;
  SourceLocation where;  // the value in the file; line 0 when the file leaves the key out
};

struct Config {
  std::string source;  // file name the config was read from
  // The TOML text it was parsed from: GET /api/config serves it, so that `sluice check
  // --diff-running` compares a new file with what the process actually runs.
  std::string text;
  ServerSection server;
  LogSection log;
  AdminSection admin;
  DnsSection dns;
  AcmeSection acme;
  ReloadSection reload;
  FleetSection fleet;
  std::vector<RouteConfig> routes;
  std::vector<UpstreamConfig> upstreams;  // in file order
  std::vector<KeyValue> keys;             // in the order the loader read them

  const UpstreamConfig* find_upstream(std::string_view name) const;
  const KeyValue* find_key(std::string_view path) const;
};

}  // namespace sluice::config
