#include "sluice/config/loader.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <cstdio>
#include <limits>
#include <numeric>
#include <span>
#include <system_error>
#include <unordered_map>

#include <netdb.h>
#include <sys/socket.h>

#include <boost/url/ipv4_address.hpp>
#include <boost/url/ipv6_address.hpp>
#include <toml++/toml.h>

#include "sluice/core/file.hpp"
#include "sluice/core/log_file.hpp"
#include "sluice/config/units.hpp"
#include "sluice/config/expect_status.hpp"
#include "sluice/config/fail_on.hpp"
#include "sluice/http/edge_rules.hpp"
#include "sluice/http/chars.hpp"
#include "sluice/config/idempotency.hpp"
#include "sluice/tls/context.hpp"

namespace sluice::config {

namespace {

using Keys = std::span<const std::string_view>;

// The bounds below are documented in docs/configuration.md; change both together.
constexpr std::int64_t max_workers = 1024;
constexpr std::int64_t max_connections_limit = 1'000'000;
constexpr std::int64_t max_keepalive = 100'000;
constexpr std::int64_t max_weight = 1000;
// Past a day a timeout is a typo ("10h" for "10s"), and a bound keeps `now() + timeout` far
// from overflowing the clock's representation.
constexpr Duration max_timeout = std::chrono::hours(24);
constexpr std::uint64_t min_header_bytes = 1 * KiB;
constexpr std::uint64_t max_header_bytes_limit = 1 * MiB;
constexpr std::uint64_t min_uri_bytes = 64;  // "GET /" plus a short query must always fit
constexpr std::uint64_t no_limit = std::numeric_limits<std::uint64_t>::max();

constexpr std::array<std::string_view, 7> root_keys{"server", "log",       "admin",    "route",
                                                    "upstreams", "dns", "reload"};
constexpr std::array<std::string_view, 5> reload_keys{"watch", "failed_percent", "failed_factor",
                                                      "min_requests", "up_lost_percent"};
// Watching a reload for longer than this holds the previous config for a rollback nobody expects.
constexpr Duration max_reload_watch = std::chrono::hours(1);
constexpr std::array<std::string_view, 21> server_keys{
    "listen",           "workers",       "header_timeout", "idle_timeout",   "shutdown_timeout",
    "max_header_bytes", "max_uri_bytes", "max_body_bytes", "max_connections", "shutdown_delay",
    "watch_config",     "tunnel_drain_timeout", "tls", "health_ready_timeout", "state_file",
    "proxy_protocol", "trusted_proxies", "forwarded_header", "defer_accept", "error_detail",
    "error_pages"};
constexpr std::array<std::string_view, 5> tls_listener_keys{"listen", "certificates", "min_version",
                                                            "ciphers", "proxy_protocol"};
constexpr std::array<std::string_view, 2> certificate_keys{"cert", "key"};
constexpr std::array<std::string_view, 2> tls_versions{"1.2", "1.3"};
constexpr std::array<std::string_view, 5> log_keys{"level", "access", "access_file", "error_file",
                                                   "error_format"};
constexpr std::array<std::string_view, 3> admin_keys{"listen", "token_file", "allowed_hosts"};
constexpr std::array<std::string_view, 12> route_keys{
    "host",           "path_prefix",      "upstream",     "request_headers",
    "response_headers", "strip_prefix",   "rewrite_prefix", "return",
    "allow",          "deny",             "rate_limit",   "error_pages"};
constexpr std::array<std::string_view, 3> header_rule_keys{"set", "add", "remove"};
constexpr std::array<std::string_view, 4> return_keys{"status", "location", "body", "content_type"};
constexpr std::array<std::string_view, 4> rate_limit_keys{"rate", "burst", "key", "max_keys"};
constexpr std::array<std::string_view, 2> forwarded_header_modes{"off", "add"};
constexpr std::array<std::string_view, 2> error_detail_modes{"status", "full"};
// An error page is sent whole from memory with each answer it serves.
constexpr std::uint64_t max_error_page_bytes = 1 * MiB;
constexpr std::array<std::string_view, 27> upstream_keys{
    "balance",  "connect_timeout",     "response_timeout", "keepalive",     "keepalive_timeout",
    "servers",  "health",              "passive",          "slow_start",    "when_all_down",
    "hash_key", "hash_balance_factor", "queue_size",       "queue_timeout", "retry",
    "tls",      "tls_verify",          "tls_ca_file",      "tls_server_name", "tls_cert",
    "tls_key",  "tunnel_idle_timeout", "request_headers", "response_headers", "send_timeout",
    "idempotency", "discover"};
constexpr std::array<std::string_view, 8> server_entry_keys{
    "address", "name", "weight", "backup", "max_conns", "drain", "resolve", "resolve_interval"};
constexpr std::array<std::string_view, 7> dns_keys{"servers", "timeout",   "attempts", "min_ttl",
                                                   "max_ttl", "stale_ttl", "allow_empty"};
constexpr std::array<std::string_view, 2> discover_keys{"srv", "resolve_interval"};
constexpr std::array<std::string_view, 12> health_keys{
    "path", "method",        "host",        "port",   "interval",     "timeout",
    "rise", "expect_status", "expect_body", "jitter", "initial_state", "fall"};
constexpr std::array<std::string_view, 5> passive_keys{
    "max_fails", "fail_timeout", "max_ejection_time", "max_ejected_percent", "fail_on"};
constexpr std::array<std::string_view, 12> retry_keys{
    "attempts", "on", "idempotency_header", "per_try_timeout", "deadline",
    "backoff",  "backoff_max", "budget", "budget_min", "buffer", "budget_window", "budget_min_per_sec"};
constexpr std::array<std::string_view, 11> idempotency_keys{
    "mode", "header", "replay_window", "max_stored_body", "store_statuses", "scope", "wait",
    "store", "memory_limit", "on_store_error", "store_timeout"};
constexpr std::array<std::string_view, 3> idempotency_modes{"off", "collapse", "replay"};
constexpr std::array<std::string_view, 2> store_error_policies{"forward", "reject"};
constexpr std::array<std::string_view, 2> probe_methods{"GET", "HEAD"};
constexpr std::array<std::string_view, 2> initial_states{"up", "down"};
constexpr std::array<std::string_view, 2> all_down_policies{"fail", "panic"};
constexpr std::int64_t max_attempts = 10;
constexpr std::array<std::string_view, 5> log_levels{"trace", "debug", "info", "warn", "error"};
constexpr std::array<std::string_view, 3> access_formats{"text", "json", "off"};
constexpr std::array<std::string_view, 2> error_formats{"text", "json"};

std::string_view type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Levenshtein distance, case-insensitive: "Listen" and "listn" are both one edit from "listen".
std::size_t edit_distance(std::string_view a_text, std::string_view b_text) {
  const std::string a = lower(a_text);
  const std::string b = lower(b_text);
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The candidate `word` is most plausibly a typo of: at most two edits away (and not a rewrite of
// a short word), or a prefix either way ("warning" for "warn", "upstream" for "upstreams").
std::optional<std::string_view> closest(std::string_view word, Keys candidates) {
  std::optional<std::string_view> best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  const std::string word_lower = lower(word);
  for (const auto candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    const bool prefix = std::min(word.size(), candidate.size()) >= 3 &&
                        (word_lower.starts_with(candidate) || candidate.starts_with(word_lower));
    const bool plausible = (distance <= 2 && distance < word.size()) || prefix;
    if (plausible && distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::string quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

std::string join_strings(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// The effective `retry.on` as written in TOML, for KeyValue.
std::string retry_on_text(const RetryConfig& r) {
  std::vector<std::string> items;
  const std::pair<bool, std::string_view> words[] = {
      {r.on_connect, "connect"}, {r.on_refused, "refused"}, {r.on_reset, "reset"}, {r.on_timeout, "timeout"}};
  for (const auto& [on, word] : words)
    if (on) items.push_back(quoted(word));
  for (const unsigned status : r.on_status) items.push_back(std::to_string(status));
  return "[" + join_strings(items) + "]";
}

// A listen list as written in TOML, for KeyValue.
std::string addresses_text(const std::vector<HostPort>& addresses) {
  std::vector<std::string> items;
  for (const auto& a : addresses) items.push_back(quoted(a.to_string()));
  return "[" + join_strings(items) + "]";
}

std::string join(Keys items) {
  std::string out;
  for (const auto item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

// One wording for unknown keys and unknown enumerated values alike.
std::string unknown_message(std::string_view kind, std::string_view value, Keys valid) {
  std::string message = "unknown " + std::string(kind) + " '" + std::string(value) + "'";
  if (const auto guess = closest(value, valid)) {
    return message + "; did you mean '" + std::string(*guess) + "'?";
  }
  if (valid.empty()) return message;
  return message + "; expected one of: " + join(valid);
}

std::string child_path(std::string_view parent, std::string_view key) {
  return parent.empty() ? std::string(key) : std::string(parent) + "." + std::string(key);
}

std::string index_path(std::string_view parent, std::size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

SourceLocation location_of(const toml::node& node) {
  return {static_cast<int>(node.source().begin.line), static_cast<int>(node.source().begin.column)};
}

bool is_before(const toml::node& a, const toml::node& b) {
  const auto& x = a.source().begin;
  const auto& y = b.source().begin;
  return x.line != y.line ? x.line < y.line : x.column < y.column;
}

bool all_of_chars(std::string_view text, bool (*allowed)(char)) {
  return !text.empty() && std::all_of(text.begin(), text.end(), allowed);
}

bool upstream_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

// Server names may appear in metrics labels, logs and admin URLs: no spaces, no '/'.
bool server_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
         c == ':';
}

bool dns_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

bool dns_name_char(char c) { return dns_char(c) || c == '.'; }

// "api.example.com" or "*.example.com", lower-cased: RFC 9110 §4.2.3 compares hosts
// case-insensitively, so the router can compare bytes.
std::optional<std::string> normalize_host_pattern(std::string_view text) {
  std::string host = lower(text);
  std::string_view rest = host;
  if (rest.starts_with("*.")) rest.remove_prefix(2);
  while (true) {
    const auto dot = rest.find('.');
    if (!all_of_chars(rest.substr(0, dot), dns_char)) return std::nullopt;
    if (dot == std::string_view::npos) break;
    rest.remove_prefix(dot + 1);
  }
  return host;
}

// 127.0.0.0/8, ::1 and "localhost": addresses only this host can connect to.
bool is_loopback_host(std::string_view host) {
  if (lower(host) == "localhost") return true;
  if (const auto v4 = boost::urls::parse_ipv4_address(host)) return v4->is_loopback();
  if (const auto v6 = boost::urls::parse_ipv6_address(host)) return v6->is_loopback();
  return false;
}

// The runtime resolves every host when it builds sockets; a name it could not resolve is an
// error here, at the key, so that `check` refuses what `run` and a reload would. A dotted
// number that is no IPv4 address ("999.1.1.1") is said so rather than sent to DNS. Fuzz builds
// (SLUICE_CONFIG_NO_DNS) skip the lookup: they must stay hermetic.
bool resolvable(const std::string& host, std::string* why) {
  if (boost::urls::parse_ipv4_address(host) || boost::urls::parse_ipv6_address(host)) return true;
  if (std::all_of(host.begin(), host.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; })) {
    *why = "'" + host + "' is not a valid IPv4 address";
    return false;
  }
#ifndef SLUICE_CONFIG_NO_DNS
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  if (rc != 0) {
    *why = "cannot resolve '" + host + "': " + ::gai_strerror(rc);
    return false;
  }
#endif
  return true;
}

// Formats "listen" addresses so that "LOCALHOST:80" and "localhost:80" count as the same one.
std::string listen_key(const HostPort& address) {
  return lower(address.host) + ":" + std::to_string(address.port);
}

// Walks a parsed TOML document once, filling a Config with what is valid and recording every
// problem; a bad value leaves the default in place so that the walk can go on.
class Builder {
public:
  explicit Builder(std::string_view file) : file_(file) {}

  Config build(const toml::table& root) {
    Config config;
    config.source = file_;
    check_keys(root, "", root_keys);
    read_server(root, config.server);
    read_log(root, config.log);
    read_admin(root, config.admin);
    read_dns(root, config.dns);
    read_reload(root, config.reload);
    read_routes(root, config.routes);
    read_upstreams(root, config.upstreams);
    check_routing(root, config);
    config.keys = std::move(keys_);
    return config;
  }

  // Errors in file order, the order a reader fixes them in.
  std::vector<ConfigError> take_errors() {
    std::stable_sort(errors_.begin(), errors_.end(), [](const auto& a, const auto& b) {
      return a.line != b.line ? a.line < b.line : a.column < b.column;
    });
    return std::move(errors_);
  }
  std::vector<ConfigError> take_warnings() { return std::move(warnings_); }

private:
  void error(const toml::source_region& where, std::string key_path, std::string message) {
    // Every parsed node has a position; the fallback only keeps "FILE:0:0" out of messages.
    const int line = std::max(1, static_cast<int>(where.begin.line));
    const int column = std::max(1, static_cast<int>(where.begin.column));
    errors_.push_back({file_, line, column, std::move(key_path), std::move(message)});
  }

  void error(const toml::node& node, std::string key_path, std::string message) {
    error(node.source(), std::move(key_path), std::move(message));
  }

  // A key that is valid but has no effect (or is deprecated): the file is accepted, and check and
  // run say so.
  void warn(const toml::node& node, std::string key_path, std::string message) {
    const auto& where = node.source();
    warnings_.push_back({file_, std::max(1, static_cast<int>(where.begin.line)),
                         std::max(1, static_cast<int>(where.begin.column)), std::move(key_path),
                         std::move(message)});
  }

  void type_error(const toml::node& node, std::string key_path, std::string_view expected) {
    error(node, std::move(key_path),
          "expected " + std::string(expected) + ", got " + std::string(type_name(node)));
  }

  void check_keys(const toml::table& table, std::string_view path, Keys known) {
    for (auto&& [key, value] : table) {
      if (std::find(known.begin(), known.end(), key.str()) != known.end()) continue;
      const auto& where = key.source().begin.line != 0 ? key.source() : value.source();
      error(where, child_path(path, key.str()), unknown_message("key", key.str(), known));
    }
  }

  // Reports a required key that is absent, at the table that lacks it.
  bool require(const toml::table& table, std::string_view key, std::string_view path,
               std::string_view what) {
    if (table.contains(key)) return true;
    error(table, child_path(path, key), "required key is missing (" + std::string(what) + ")");
    return false;
  }

  // The sub-table at `key`; nullptr when absent or not a table (reported).
  const toml::table* section(const toml::table& parent, std::string_view key) {
    const toml::node* node = parent.get(key);
    if (node == nullptr) return nullptr;
    if (const auto* table = node->as_table()) return table;
    type_error(*node, std::string(key), "a table");
    return nullptr;
  }

  // The sub-table at `key`, or an empty one when absent: its keys are read (and noted) at their
  // defaults either way.
  const toml::table& section_or_empty(const toml::table& parent, std::string_view key) {
    static const toml::table empty;
    const toml::table* table = section(parent, key);
    return table != nullptr ? *table : empty;
  }

  // The value at `key` if present and of type T; another type is reported and yields nullptr.
  template <typename T>
  const toml::value<T>* typed(const toml::table& table, std::string_view key,
                              const std::string& path, std::string_view expected) {
    const toml::node* node = table.get(key);
    if (node == nullptr) return nullptr;
    if (const auto* value = node->as<T>()) return value;
    type_error(*node, path, expected);
    return nullptr;
  }

  // Records the key's effective value (see KeyValue), live until needs_restart() says otherwise.
  void note(const toml::table& table, std::string_view key, const std::string& path,
            std::string value) {
    const toml::node* node = table.get(key);
    keys_.push_back({path, std::move(value), Reload::live,
                     node != nullptr ? location_of(*node) : SourceLocation{}});
  }

  // The reload class of a key that only a restart can change, declared beside its read.
  void needs_restart(std::string_view path) {
    for (auto it = keys_.rbegin(); it != keys_.rend(); ++it)
      if (it->path == path) {
        it->reload = Reload::restart;
        return;
      }
  }

  // Readers: an absent key leaves `out` at its default; a bad value is reported and does too.
  // Each returns the node it read, for checks that relate several values, and notes the value.
  const toml::node* read_string(const toml::table& table, std::string_view key,
                                const std::string& path, std::string& out) {
    const toml::node* node = take_string(table, key, path, out);
    note(table, key, path, quoted(out));
    return node;
  }

  template <typename T>
  const toml::node* read_integer(const toml::table& table, std::string_view key,
                                 const std::string& path, T& out, std::int64_t min,
                                 std::int64_t max, std::string_view below_min_hint = {}) {
    const toml::node* node = take_integer(table, key, path, out, min, max, below_min_hint);
    note(table, key, path, std::to_string(out));
    return node;
  }

  const toml::node* read_duration(const toml::table& table, std::string_view key,
                                  const std::string& path, Duration& out, bool zero_allowed) {
    const toml::node* node = take_duration(table, key, path, out, zero_allowed);
    note(table, key, path, format_duration(out));
    return node;
  }

  const toml::node* read_size(const toml::table& table, std::string_view key,
                              const std::string& path, std::uint64_t& out, std::uint64_t min,
                              std::uint64_t max) {
    const toml::node* node = take_size(table, key, path, out, min, max);
    note(table, key, path, format_size(out));
    return node;
  }

  const toml::node* take_string(const toml::table& table, std::string_view key,
                                const std::string& path, std::string& out) {
    const auto* value = typed<std::string>(table, key, path, "a string");
    if (value != nullptr) out = value->get();
    return value;
  }

  template <typename T>
  const toml::node* take_integer(const toml::table& table, std::string_view key,
                                 const std::string& path, T& out, std::int64_t min,
                                 std::int64_t max, std::string_view below_min_hint) {
    const auto* value = typed<std::int64_t>(table, key, path, "an integer");
    if (value == nullptr) return nullptr;
    const std::int64_t number = value->get();
    if (number < min || number > max) {
      error(*value, path,
            "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " +
                std::to_string(number) + (number < min ? std::string(below_min_hint) : ""));
      return nullptr;
    }
    out = static_cast<T>(number);
    return value;
  }

  const toml::node* take_duration(const toml::table& table, std::string_view key,
                                  const std::string& path, Duration& out, bool zero_allowed) {
    // The default doubles as the example of what to write.
    const std::string expected = "a string like \"" + format_duration(out) + "\"";
    const auto* value = typed<std::string>(table, key, path, expected);
    if (value == nullptr) return nullptr;
    std::string why;
    const auto duration = parse_duration(value->get(), &why);
    if (!duration) {
      error(*value, path, why);
    } else if (*duration == Duration::zero() && !zero_allowed) {
      error(*value, path, "must be greater than 0s");
    } else if (*duration > max_timeout) {
      error(*value, path,
            "must be at most " + format_duration(max_timeout) + ", got " +
                format_duration(*duration));
    } else {
      out = *duration;
      return value;
    }
    return nullptr;
  }

  // Sizes are strings with a unit, or integers counting bytes.
  const toml::node* take_size(const toml::table& table, std::string_view key,
                              const std::string& path, std::uint64_t& out, std::uint64_t min,
                              std::uint64_t max) {
    const toml::node* node = table.get(key);
    if (node == nullptr) return nullptr;
    std::optional<std::uint64_t> bytes;
    if (const auto* text = node->as_string()) {
      std::string why;
      bytes = parse_size(text->get(), &why);
      if (!bytes) error(*node, path, why);
    } else if (const auto* integer = node->as_integer()) {
      if (integer->get() < 0) {
        error(*node, path, "must not be negative, got " + std::to_string(integer->get()));
      } else {
        bytes = static_cast<std::uint64_t>(integer->get());
      }
    } else {
      type_error(*node, path,
                 "a size like \"" + format_size(out) + "\" or an integer number of bytes");
    }
    if (!bytes) return nullptr;
    if (*bytes < min || *bytes > max) {
      error(*node, path,
            "must be between " + format_size(min) + " and " + format_size(max) + ", got " +
                format_size(*bytes));
      return nullptr;
    }
    out = *bytes;
    return node;
  }

  // A string that must be one of `valid`.
  const toml::node* read_choice(const toml::table& table, std::string_view key,
                                const std::string& path, std::string_view kind, Keys valid,
                                std::string& out) {
    std::string value;
    const toml::node* node = take_string(table, key, path, value);
    if (node != nullptr && std::find(valid.begin(), valid.end(), value) == valid.end()) {
      error(*node, path, unknown_message(kind, value, valid));
      node = nullptr;
    } else if (node != nullptr) {
      out = std::move(value);
    }
    note(table, key, path, quoted(out));
    return node;
  }

  const toml::node* read_bool(const toml::table& table, std::string_view key,
                              const std::string& path, bool& out) {
    const auto* value = typed<bool>(table, key, path, "true or false");
    if (value != nullptr) out = value->get();
    note(table, key, path, out ? "true" : "false");
    return value;
  }

  // A number (integer or float) within [min, max].
  const toml::node* read_number(const toml::table& table, std::string_view key,
                                const std::string& path, double& out, double min, double max) {
    const toml::node* node = take_number(table, key, path, out, min, max);
    char text[32];
    std::snprintf(text, sizeof text, "%g", out);
    note(table, key, path, text);
    return node;
  }

  const toml::node* take_number(const toml::table& table, std::string_view key,
                                const std::string& path, double& out, double min, double max) {
    const toml::node* node = table.get(key);
    if (node == nullptr) return nullptr;
    double number = 0;
    if (const auto* f = node->as_floating_point()) {
      number = f->get();
    } else if (const auto* i = node->as_integer()) {
      number = static_cast<double>(i->get());
    } else {
      type_error(*node, path, "a number");
      return nullptr;
    }
    if (!(number >= min && number <= max)) {
      error(*node, path, fmt_range(min, max, number));
      return nullptr;
    }
    out = number;
    return node;
  }

  static std::string fmt_range(double min, double max, double got) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "must be between %g and %g, got %g", min, max, got);
    return buf;
  }

  // An array of strings.
  const toml::node* read_strings(const toml::table& table, std::string_view key,
                                 const std::string& path, std::vector<std::string>& out) {
    const toml::node* node = take_strings(table, key, path, out);
    std::vector<std::string> items;
    for (const auto& item : out) items.push_back(quoted(item));
    note(table, key, path, "[" + join_strings(items) + "]");
    return node;
  }

  const toml::node* take_strings(const toml::table& table, std::string_view key,
                                 const std::string& path, std::vector<std::string>& out) {
    const toml::node* node = table.get(key);
    if (node == nullptr) return nullptr;
    const auto* array = node->as_array();
    if (array == nullptr) {
      type_error(*node, path, "an array of strings");
      return nullptr;
    }
    std::vector<std::string> items;
    for (std::size_t i = 0; i < array->size(); ++i) {
      const toml::node& item = *array->get(i);
      if (const auto* text = item.as_string()) {
        items.push_back(text->get());
      } else if (const auto* number = item.as_integer()) {
        items.push_back(std::to_string(number->get()));  // on = [502, 503] reads naturally too
      } else {
        type_error(item, index_path(path, i), "a string");
        return nullptr;
      }
    }
    out = std::move(items);
    return node;
  }

  void read_health(const toml::table& upstream, const std::string& path,
                   std::optional<HealthCheckConfig>& out) {
    const toml::table* table = section(upstream, "health");
    note(upstream, "health", path + ".health", table != nullptr ? "on" : "off");
    if (table == nullptr) return;
    const std::string p = path + ".health";
    check_keys(*table, p, health_keys);
    HealthCheckConfig h;
    // Both go into the probe's request line and Host header as written.
    const auto visible = [](const std::string& v) {
      return std::all_of(v.begin(), v.end(), [](char c) { return c > 0x20 && c < 0x7f; });
    };
    if (const auto* node = read_string(*table, "path", p + ".path", h.path);
        node != nullptr && (!h.path.starts_with('/') || !visible(h.path))) {
      error(*node, p + ".path", "must start with '/' and hold no spaces or control characters, got '" + h.path + "'");
    }
    read_choice(*table, "method", p + ".method", "probe method", probe_methods, h.method);
    if (const auto* node = read_string(*table, "host", p + ".host", h.host);
        node != nullptr && !visible(h.host)) {
      error(*node, p + ".host", "must hold no spaces or control characters");
    }
    read_integer(*table, "port", p + ".port", h.port, 0, 65535);
    read_duration(*table, "interval", p + ".interval", h.interval, false);
    const toml::node* timeout = read_duration(*table, "timeout", p + ".timeout", h.timeout, false);
    if (h.timeout >= h.interval) {
      error(timeout != nullptr ? *timeout : static_cast<const toml::node&>(*table), p + ".timeout",
            "must be shorter than interval (" + format_duration(h.interval) + "), got " +
                format_duration(h.timeout));
    }
    read_integer(*table, "rise", p + ".rise", h.rise, 1, 100);
    read_integer(*table, "fall", p + ".fall", h.fall, 1, 100);
    std::string expect;
    if (const auto* node = take_string(*table, "expect_status", p + ".expect_status", expect)) {
      std::string why;
      if (auto statuses = health::StatusMatcher::parse(expect, &why)) h.expect_status = *statuses;
      else error(*node, p + ".expect_status", why);
    }
    note(*table, "expect_status", p + ".expect_status", quoted(h.expect_status.to_string()));
    if (const auto* node = read_string(*table, "expect_body", p + ".expect_body", h.expect_body);
        node != nullptr && h.method == "HEAD" && !h.expect_body.empty()) {
      error(*node, p + ".expect_body", "a HEAD probe has no body to match; use method = \"GET\"");
    }
    read_number(*table, "jitter", p + ".jitter", h.jitter, 0.0, 0.5);
    std::string initial = "up";
    read_choice(*table, "initial_state", p + ".initial_state", "initial state", initial_states, initial);
    h.initially_up = initial == "up";
    out = std::move(h);
  }

  void read_passive(const toml::table& upstream, const std::string& path,
                    PassiveConfig& out) {
    const toml::table* table = section(upstream, "passive");
    if (table == nullptr) return;  // the defaults: passive checks are on
    const std::string p = path + ".passive";
    check_keys(*table, p, passive_keys);
    PassiveConfig c;
    read_integer(*table, "max_fails", p + ".max_fails", c.max_fails, 0, 1000);
    read_duration(*table, "fail_timeout", p + ".fail_timeout", c.fail_timeout, false);
    read_duration(*table, "max_ejection_time", p + ".max_ejection_time", c.max_ejection_time, false);
    read_integer(*table, "max_ejected_percent", p + ".max_ejected_percent", c.max_ejected_percent, 0, 100);
    std::vector<std::string> fail_on;
    if (const auto* node = take_strings(*table, "fail_on", p + ".fail_on", fail_on)) {
      check_failure_items(*node, p + ".fail_on", fail_on, nullptr);
      if (auto parsed = health::FailOn::parse(fail_on)) c.fail_on = *parsed;
    }
    note(*table, "fail_on", p + ".fail_on", c.fail_on.to_string());
    out = std::move(c);
  }

  // [upstreams.NAME.idempotency] (docs/idempotency.md). Every key is live; a change of store,
  // memory_limit or store_timeout starts a new, empty store (idempotency::make_guard).
  void read_idempotency(const toml::table& upstream, const std::string& path, idempotency::Config& c) {
    const toml::table* table = &section_or_empty(upstream, "idempotency");
    const std::string p = path + ".idempotency";
    check_keys(*table, p, idempotency_keys);
    std::string mode = "off";
    read_choice(*table, "mode", p + ".mode", "idempotency mode", idempotency_modes, mode);
    c.mode = mode == "replay" ? idempotency::Mode::replay
             : mode == "collapse" ? idempotency::Mode::collapse : idempotency::Mode::off;
    if (const auto* node = read_string(*table, "header", p + ".header", c.header);
        node != nullptr && !c.header.empty() && !http::is_token(c.header))
      error(*node, p + ".header", "must be a header name (a token) or \"\" (the retry section's idempotency_header), got '" + c.header + "'");
    read_duration(*table, "replay_window", p + ".replay_window", c.replay_window, false);
    read_size(*table, "max_stored_body", p + ".max_stored_body", c.max_stored_body, 0, 64 * MiB);
    if (const auto* node = read_strings(*table, "store_statuses", p + ".store_statuses", c.store_statuses))
      check_store_statuses(*node, p + ".store_statuses", c);
    if (const auto* node = read_strings(*table, "scope", p + ".scope", c.scope)) {
      for (std::size_t i = 0; i < c.scope.size(); ++i) {
        const auto& s = c.scope[i];
        const bool header = s.starts_with("header:") && http::is_token(std::string_view(s).substr(7));
        if (!header && s != "client_ip")
          error(*node->as_array()->get(i), index_path(p + ".scope", i),
                "expected \"header:NAME\" or \"client_ip\", got '" + s + "'");
      }
    }
    read_duration(*table, "wait", p + ".wait", c.wait, false);
    if (const auto* node = read_string(*table, "store", p + ".store", c.store); node != nullptr && c.store != "memory") {
      if (const auto a = idempotency::parse_redis_url(c.store); !a.ok) error(*node, p + ".store", a.why);
    }
    const auto* limit = read_size(*table, "memory_limit", p + ".memory_limit", c.memory_limit, 64 * KiB, 64 * GiB);
    if (c.store == "memory" && c.mode != idempotency::Mode::off && c.memory_limit < 4 * c.max_stored_body)
      error(limit != nullptr ? *limit : static_cast<const toml::node&>(*table), p + ".memory_limit",
            "must hold at least 4 answers of max_stored_body (" + format_size(c.max_stored_body) +
                "), got " + format_size(c.memory_limit));
    std::string on_error = "forward";
    read_choice(*table, "on_store_error", p + ".on_store_error", "on_store_error policy",
                store_error_policies, on_error);
    c.on_store_error = on_error == "reject" ? idempotency::OnStoreError::reject : idempotency::OnStoreError::forward;
    read_duration(*table, "store_timeout", p + ".store_timeout", c.store_timeout, false);
  }

  // store_statuses: classes ("2xx") or codes ("409"), each reported at its index.
  void check_store_statuses(const toml::node& node, const std::string& path, idempotency::Config& c) {
    c.store_classes = 0;
    c.store_codes.clear();
    for (std::size_t i = 0; i < c.store_statuses.size(); ++i) {
      const auto& s = c.store_statuses[i];
      unsigned code = 0;
      const auto r = std::from_chars(s.data(), s.data() + s.size(), code);
      if (s.size() == 3 && s[0] >= '1' && s[0] <= '5' && s[1] == 'x' && s[2] == 'x') {
        c.store_classes |= 1u << (s[0] - '0');
      } else if (r.ec == std::errc() && r.ptr == s.data() + s.size() && code >= 100 && code <= 599) {
        c.store_codes.push_back(code);
      } else {
        error(*node.as_array()->get(i), index_path(path, i),
              "expected a status class like \"2xx\" or a code like \"409\", got '" + s + "'");
      }
    }
  }

  void read_retry(const toml::table& upstream, const std::string& path, RetryConfig& r) {
    const toml::table* table = &section_or_empty(upstream, "retry");
    const std::string p = path + ".retry";
    check_keys(*table, p, retry_keys);
    read_integer(*table, "attempts", p + ".attempts", r.attempts, 1, max_attempts);
    std::vector<std::string> on;
    if (const auto* node = take_strings(*table, "on", p + ".on", on)) {
      r.on_connect = r.on_refused = r.on_reset = r.on_timeout = false;
      r.on_status.clear();
      check_failure_items(*node, p + ".on", on, &r);
    }
    note(*table, "on", p + ".on", retry_on_text(r));
    read_string(*table, "idempotency_header", p + ".idempotency_header", r.idempotency_header);
    read_duration(*table, "per_try_timeout", p + ".per_try_timeout", r.per_try_timeout, true);
    read_duration(*table, "deadline", p + ".deadline", r.deadline, true);
    read_duration(*table, "backoff", p + ".backoff", r.backoff, true);
    read_duration(*table, "backoff_max", p + ".backoff_max", r.backoff_max, true);
    read_number(*table, "budget", p + ".budget", r.budget, 0.0, 10.0);
    read_duration(*table, "budget_window", p + ".budget_window", r.budget_window, false);
    read_number(*table, "budget_min_per_sec", p + ".budget_min_per_sec", r.budget_min_per_sec, 0.0,
                100000.0);
    // Deprecated (the token budget before budget_window): read as budget_min_per_sec.
    std::uint32_t budget_min = 0;
    if (const auto* node = read_integer(*table, "budget_min", p + ".budget_min", budget_min, 0, 100000)) {
      if (table->contains("budget_min_per_sec"))
        error(*node, p + ".budget_min", "deprecated alias of budget_min_per_sec; set only one");
      else {
        r.budget_min_per_sec = budget_min;
        warn(*node, p + ".budget_min", "deprecated: read as budget_min_per_sec = " +
                                           std::to_string(budget_min) + " (retries per second always allowed)");
      }
    }
    read_size(*table, "buffer", p + ".buffer", r.buffer, 0, 64 * MiB);
  }

  // `passive.fail_on` and `retry.on`: one grammar (health::parse_failure_item), every bad item
  // reported at its index. With `retry`, the items also fill its conditions; a retried status
  // must be an error (400..599).
  void check_failure_items(const toml::node& node, const std::string& path,
                           const std::vector<std::string>& items, RetryConfig* retry) {
    const auto* array = node.as_array();
    for (std::size_t i = 0; i < items.size(); ++i) {
      const toml::node& at = array != nullptr ? *array->get(i) : node;
      std::string why;
      const auto item = health::parse_failure_item(items[i], &why);
      if (!item) {
        error(at, index_path(path, i), why);
        continue;
      }
      if (retry == nullptr) continue;
      using W = health::FailureItem::Word;
      switch (item->word) {
        case W::connect: retry->on_connect = true; break;
        case W::refused: retry->on_refused = true; break;
        case W::reset: retry->on_reset = true; break;
        case W::timeout: retry->on_timeout = true; break;
        case W::none: add_retried_statuses(at, index_path(path, i), item->statuses, *retry); break;
      }
    }
  }

  void add_retried_statuses(const toml::node& at, const std::string& path,
                            const health::StatusMatcher& statuses, RetryConfig& retry) {
    for (unsigned code = 100; code < 400; ++code) {
      if (!statuses.match(code)) continue;
      error(at, path, "a retried status must be 400..599, got " + std::to_string(code));
      return;
    }
    for (unsigned code = 400; code < 600; ++code)
      if (statuses.match(code) && std::find(retry.on_status.begin(), retry.on_status.end(), code) == retry.on_status.end())
        retry.on_status.push_back(code);
  }

  // Rules between retry keys and the upstream's timeouts, each reported at the key that breaks
  // it (or the [retry] table when that key is left at its default).
  void check_retry_rules(const toml::table& table, const std::string& path, const UpstreamConfig& u) {
    const toml::table* retry = table.get_as<toml::table>("retry");
    if (retry == nullptr) return;  // defaults keep every rule
    const std::string p = path + ".retry";
    const auto at = [&](std::string_view key) -> const toml::node& {
      const toml::node* node = retry->get(key);
      return node != nullptr ? *node : static_cast<const toml::node&>(*retry);
    };
    const auto& r = u.retry;
    if (r.backoff > r.backoff_max)
      error(at("backoff"), p + ".backoff",
            "must not exceed backoff_max (" + format_duration(r.backoff_max) + "), got " + format_duration(r.backoff));
    if (r.per_try_timeout > u.response_timeout)
      error(at("per_try_timeout"), p + ".per_try_timeout",
            "must not exceed response_timeout (" + format_duration(u.response_timeout) + "), got " +
                format_duration(r.per_try_timeout));
    // Without per_try_timeout a deadline shorter than response_timeout is a plain cap on the
    // request ("answer within 300ms"); with one, a deadline that cannot hold one try is a typo.
    if (r.deadline != Duration::zero() && r.per_try_timeout != Duration::zero() && r.deadline < r.per_try_timeout)
      error(at("deadline"), p + ".deadline",
            "must be at least one try's timeout (per_try_timeout " + format_duration(r.per_try_timeout) +
                "), got " + format_duration(r.deadline));
    // RFC 9110 §5.1: a field name is a token.
    if (!r.idempotency_header.empty() && !http::is_token(r.idempotency_header))
      error(at("idempotency_header"), p + ".idempotency_header",
            "'" + r.idempotency_header + "' is not a header name (letters, digits and !#$%&'*+-.^_`|~)");
  }

  // `resolvable_now` false: a name resolved later through [dns] (a `resolve` server), which
  // the system resolver that `check` would ask may not know.
  std::optional<HostPort> parse_address(const toml::node& node, const std::string& path,
                                        bool zero_port_allowed, bool resolvable_now = true) {
    const auto* text = node.as_string();
    if (text == nullptr) {
      type_error(node, path, "a string like \"127.0.0.1:8080\"");
      return std::nullopt;
    }
    std::string why;
    auto address = parse_host_port(text->get(), zero_port_allowed, &why);
    if (!address) error(node, path, why);
    if (address && resolvable_now && !resolvable(address->host, &why)) {
      error(node, path, why);
      return std::nullopt;
    }
    return address;
  }

  // Two sockets cannot bind one address; the second bind would fail at start-up, far from here.
  void claim_listener(const HostPort& address, const toml::source_region& where,
                      const std::string& path) {
    const auto [it, inserted] = listeners_.try_emplace(listen_key(address), path);
    if (!inserted) {
      error(where, path,
            "duplicate listen address " + address.to_string() + " (also " + it->second + ")");
    }
  }

  void read_server(const toml::table& root, ServerSection& out) {
    const toml::table* table = &section_or_empty(root, "server");
    {
      check_keys(*table, "server", server_keys);
      read_listen(*table, out.listen);
      read_integer(*table, "workers", "server.workers", out.workers, 0, max_workers);
      // Each worker is a thread with its own sockets and pools, made once at start-up.
      needs_restart("server.workers");
      read_duration(*table, "header_timeout", "server.header_timeout", out.header_timeout, false);
      read_duration(*table, "idle_timeout", "server.idle_timeout", out.idle_timeout, false);
      // 0 is meaningful here: close in-flight requests at once.
      read_duration(*table, "shutdown_timeout", "server.shutdown_timeout", out.shutdown_timeout,
                    true);
      read_size(*table, "max_header_bytes", "server.max_header_bytes", out.max_header_bytes,
                min_header_bytes, max_header_bytes_limit);
      const toml::node* uri = read_size(*table, "max_uri_bytes", "server.max_uri_bytes",
                                        out.max_uri_bytes, min_uri_bytes, max_header_bytes_limit);
      read_size(*table, "max_body_bytes", "server.max_body_bytes", out.max_body_bytes, 0, no_limit);
      read_integer(*table, "max_connections", "server.max_connections", out.max_connections, 1,
                   max_connections_limit);
      read_duration(*table, "shutdown_delay", "server.shutdown_delay", out.shutdown_delay, true);
      read_bool(*table, "watch_config", "server.watch_config", out.watch_config);
      // Live: set on the open listening sockets at the reload.
      read_bool(*table, "defer_accept", "server.defer_accept", out.defer_accept);
      read_duration(*table, "tunnel_drain_timeout", "server.tunnel_drain_timeout",
                    out.tunnel_drain_timeout, false);
      read_duration(*table, "health_ready_timeout", "server.health_ready_timeout",
                    out.health_ready_timeout, true);
      // The wait before the one READY=1 of a start; a running process is past it.
      needs_restart("server.health_ready_timeout");
      if (const auto* file = read_string(*table, "state_file", "server.state_file", out.state_file);
          file != nullptr && out.state_file.empty()) {
        error(*file, "server.state_file", "must not be empty; remove the key to keep no state");
      }
      // Read once at start-up (restore) and owned by this process until it stops.
      needs_restart("server.state_file");
      read_tls_listeners(*table, out.tls);
      read_edge(*table, out);
      // The request line is part of the head, so a longer URI limit could never be reached.
      if (uri != nullptr && out.max_uri_bytes > out.max_header_bytes) {
        error(*uri, "server.max_uri_bytes",
              "must not exceed server.max_header_bytes (" + format_size(out.max_header_bytes) +
                  "), got " + format_size(out.max_uri_bytes));
      } else if (uri == nullptr) {
        out.max_uri_bytes = std::min(out.max_uri_bytes, out.max_header_bytes);
      }
    }
    // The default listener is claimed too, so that the admin port cannot collide with it.
    if (!table->contains("listen")) {
      for (std::size_t i = 0; i < out.listen.size(); ++i) {
        listeners_.try_emplace(listen_key(out.listen[i]), index_path("server.listen", i));
      }
    }
  }

  // [[server.tls]]: listen addresses (claimed like plain ones), certificates loaded and checked
  // here so that a bad file is an error at its line, at start-up and at every reload.
  void read_tls_listeners(const toml::table& server, std::vector<TlsListenerConfig>& out) {
    const toml::node* node = server.get("tls");
    if (node == nullptr) return;
    const toml::array* array = node->as_array();
    if (array == nullptr) {
      type_error(*node, "server.tls", "an array of tables ([[server.tls]])");
      return;
    }
    for (std::size_t i = 0; i < array->size(); ++i) {
      const std::string path = index_path("server.tls", i);
      const toml::table* table = array->get(i)->as_table();
      if (table == nullptr) {
        type_error(*array->get(i), path, "a table");
        continue;
      }
      check_keys(*table, path, tls_listener_keys);
      TlsListenerConfig tls;
      tls.where = location_of(*table);
      if (require(*table, "listen", path, "the addresses to accept TLS on")) {
        if (auto addresses = read_listen_addresses(*table->get("listen"), path + ".listen", false))
          tls.listen = std::move(*addresses);
      }
      note(*table, "listen", path + ".listen", addresses_text(tls.listen));
      std::string version = "1.2";
      read_choice(*table, "min_version", path + ".min_version", "TLS version", tls_versions, version);
      tls.min_tls13 = version == "1.3";
      if (const auto* ciphers = read_string(*table, "ciphers", path + ".ciphers", tls.ciphers)) {
        if (auto bad = tls::check_cipher_list(tls.ciphers)) error(*ciphers, path + ".ciphers", *bad);
      }
      read_bool(*table, "proxy_protocol", path + ".proxy_protocol", tls.proxy_protocol);
      if (require(*table, "certificates", path, "at least one { cert, key } pair")) {
        read_certificates(*table->get("certificates"), path + ".certificates", tls.certificates);
      }
      out.push_back(std::move(tls));
    }
  }

  void read_certificates(const toml::node& node, const std::string& path,
                         std::vector<CertificateConfig>& out) {
    const toml::array* array = node.as_array();
    if (array == nullptr) {
      type_error(node, path, "an array of { cert = \"FILE\", key = \"FILE\" } tables");
      return;
    }
    if (array->empty()) error(node, path, "at least one certificate is required");
    for (std::size_t i = 0; i < array->size(); ++i) {
      const std::string item_path = index_path(path, i);
      const toml::table* table = array->get(i)->as_table();
      if (table == nullptr) {
        type_error(*array->get(i), item_path, "a table like { cert = \"FILE\", key = \"FILE\" }");
        continue;
      }
      check_keys(*table, item_path, certificate_keys);
      CertificateConfig c;
      c.where = location_of(*table);
      const bool has_cert = require(*table, "cert", item_path, "the PEM certificate chain file");
      const bool has_key = require(*table, "key", item_path, "the PEM private key file");
      const toml::node* cert = has_cert ? read_string(*table, "cert", item_path + ".cert", c.cert) : nullptr;
      const toml::node* key = has_key ? read_string(*table, "key", item_path + ".key", c.key) : nullptr;
      if (cert != nullptr && key != nullptr) check_key_pair(*cert, *key, item_path, "cert", "key", c.cert, c.key);
      out.push_back(std::move(c));
    }
  }

  // Loads a certificate and its key the way the runtime will, reporting at the file's key.
  void check_key_pair(const toml::node& cert_node, const toml::node& key_node,
                      const std::string& path, std::string_view cert_key, std::string_view key_key,
                      const std::string& cert, const std::string& key) {
    if (const auto problem = tls::check_certified_key(cert, key)) {
      const bool about_cert = problem->file == tls::FileProblem::File::cert;
      error(about_cert ? cert_node : key_node, child_path(path, about_cert ? cert_key : key_key),
            problem->message);
    }
  }

  // The upstream's TLS keys; the servers' own "https://" come with their addresses.
  void read_upstream_tls(const toml::table& table, const std::string& path, UpstreamConfig& u) {
    read_bool(table, "tls", path + ".tls", u.tls);
    read_bool(table, "tls_verify", path + ".tls_verify", u.tls_verify);
    if (const auto* ca = read_string(table, "tls_ca_file", path + ".tls_ca_file", u.tls_ca_file)) {
      if (auto bad = tls::check_ca_file(u.tls_ca_file)) error(*ca, path + ".tls_ca_file", *bad);
    }
    if (const auto* name = read_string(table, "tls_server_name", path + ".tls_server_name", u.tls_server_name);
        name != nullptr && !u.tls_server_name.empty() && !normalize_host_pattern(u.tls_server_name) &&
        !boost::urls::parse_ipv4_address(u.tls_server_name) && !boost::urls::parse_ipv6_address(u.tls_server_name)) {
      error(*name, path + ".tls_server_name", "invalid server name '" + u.tls_server_name + "'");
    }
    const toml::node* cert = read_string(table, "tls_cert", path + ".tls_cert", u.tls_cert);
    const toml::node* key = read_string(table, "tls_key", path + ".tls_key", u.tls_key);
    if ((cert != nullptr) != (key != nullptr)) {
      error(cert != nullptr ? *cert : *key, path + (cert != nullptr ? ".tls_cert" : ".tls_key"),
            "tls_cert and tls_key go together (a client certificate and its key)");
    } else if (cert != nullptr) {
      check_key_pair(*cert, *key, path, "tls_cert", "tls_key", u.tls_cert, u.tls_key);
    }
  }

  void read_listen(const toml::table& server, std::vector<HostPort>& out) {
    const toml::node* node = server.get("listen");
    // Empty only when TLS listeners take the traffic.
    if (node != nullptr) {
      if (auto addresses = read_listen_addresses(*node, "server.listen", server.contains("tls")))
        out = std::move(*addresses);
    }
    note(server, "listen", "server.listen", addresses_text(out));
  }

  // A listen address or an array of them, each claimed (no two listeners on one address). The
  // addresses when every one is valid, else nullopt (reported).
  std::optional<std::vector<HostPort>> read_listen_addresses(const toml::node& node,
                                                             const std::string& path,
                                                             bool empty_allowed) {
    std::vector<std::pair<const toml::node*, std::string>> items;
    if (node.is_string()) {
      items.emplace_back(&node, path);
    } else if (const auto* array = node.as_array()) {
      if (array->empty() && !empty_allowed) {
        error(node, path, "at least one listen address is required");
        return std::nullopt;
      }
      for (std::size_t i = 0; i < array->size(); ++i) {
        items.emplace_back(array->get(i), index_path(path, i));
      }
    } else {
      type_error(node, path, "a \"host:port\" string or an array of them");
      return std::nullopt;
    }
    std::vector<HostPort> addresses;
    for (const auto& [item, item_path] : items) {
      // Port 0: the OS picks a free port (the first worker's bind does, the others share it);
      // hermetic tests run that way.
      if (auto address = parse_address(*item, item_path, true)) {
        if (address->port != 0) claim_listener(*address, item->source(), item_path);
        addresses.push_back(std::move(*address));
      }
    }
    if (addresses.size() != items.size()) return std::nullopt;
    return addresses;
  }

  void read_log(const toml::table& root, LogSection& out) {
    const toml::table* table = &section_or_empty(root, "log");
    check_keys(*table, "log", log_keys);
    read_choice(*table, "level", "log.level", "log level", log_levels, out.level);
    std::string access;
    if (read_choice(*table, "access", "log.access", "access log format", access_formats, access)) {
      out.access = access == "json"  ? AccessLogFormat::json
                   : access == "off" ? AccessLogFormat::off
                                     : AccessLogFormat::text;
    }
    std::string error_format = "text";
    if (read_choice(*table, "error_format", "log.error_format", "error log format", error_formats,
                    error_format)) {
      out.error_format = error_format == "json" ? ErrorLogFormat::json : ErrorLogFormat::text;
    }
    read_log_file(*table, "access_file", out.access_file);
    read_log_file(*table, "error_file", out.error_file);
  }

  // [log] access_file / error_file: live (a reload opens the new file). A file the process could
  // not open is an error here, at the key, for `check` as for `run` and reload; the file itself
  // is not created by `check`.
  void read_log_file(const toml::table& table, std::string_view key, std::string& out) {
    const std::string path = "log." + std::string(key);
    if (const auto* node = read_string(table, key, path, out)) {
      if (const auto problem = log_file_problem(out); !problem.empty()) error(*node, path, problem);
    }
  }

  void read_admin(const toml::table& root, AdminSection& out) {
    const toml::table* table = section(root, "admin");
    note(root, "admin", "admin", table != nullptr ? "on" : "off");
    if (table == nullptr) return;
    out.enabled = true;  // the section's presence is the switch
    check_keys(*table, "admin", admin_keys);
    if (const auto* file = read_string(*table, "token_file", "admin.token_file", out.token_file)) {
      check_token_file(*file, out.token_file);
    }
    read_allowed_hosts(*table, out.allowed_hosts);
    const toml::node* node = table->get("listen");
    if (node != nullptr) {
      auto address = parse_address(*node, "admin.listen", true);
      if (!address) return;
      out.listen = std::move(*address);
    }
    note(*table, "listen", "admin.listen", quoted(out.listen.to_string()));
    // The admin API drains servers and reloads the config: beyond loopback, only with a token.
    if (out.token_file.empty() && !is_loopback_host(out.listen.host)) {
      error(node != nullptr ? *node : static_cast<const toml::node&>(*table), "admin.listen",
            "admin listener on a non-loopback address needs token_file");
    }
    // Port 0 asks the OS for a free port, which cannot collide.
    if (out.listen.port != 0) {
      claim_listener(out.listen, node != nullptr ? node->source() : table->source(),
                     "admin.listen");
    }
  }

  // The runtime reads the token at start-up and on reload; a file it could not use is an error
  // here, at the key, for `check` as for `run`.
  void check_token_file(const toml::node& node, const std::string& file) {
    if (file.empty()) {
      error(node, "admin.token_file", "must not be empty; remove the key to leave POSTs open");
      return;
    }
    std::string token;
    if (const int e = read_whole_file(file, token); e != 0) {
      error(node, "admin.token_file",
            "cannot read '" + file + "': " + std::system_category().message(e));
    } else if (token.find_first_not_of(" \t\r\n") == std::string::npos) {
      error(node, "admin.token_file", "the token file '" + file + "' is empty");
    }
  }

  // [admin] allowed_hosts = ["sluice.internal"]: names a browser may reach the admin API by.
  void read_allowed_hosts(const toml::table& table, std::vector<std::string>& out) {
    const toml::node* node = read_strings(table, "allowed_hosts", "admin.allowed_hosts", out);
    if (node == nullptr) return;
    for (std::size_t i = 0; i < out.size(); ++i) {
      auto& host = out[i];
      std::ranges::transform(host, host.begin(), [](unsigned char c) { return std::tolower(c); });
      const bool name = !host.empty() && std::ranges::all_of(host, [](unsigned char c) {
        return std::isalnum(c) != 0 || c == '-' || c == '.';
      });
      if (!name) {
        error(*node->as_array()->get(i), index_path("admin.allowed_hosts", i),
              "'" + host + "' is not a host name (letters, digits, '-' and '.'; no port)");
      }
    }
  }

  void read_routes(const toml::table& root, std::vector<RouteConfig>& out) {
    const toml::node* node = root.get("route");
    if (node == nullptr) return;
    const toml::array* array = node->as_array();
    if (array == nullptr) {
      type_error(*node, "route", "an array of tables ([[route]])");
      return;
    }
    // (host, path_prefix) -> the route that claimed it first.
    std::unordered_map<std::string, std::string> seen;
    for (std::size_t i = 0; i < array->size(); ++i) {
      const std::string path = index_path("route", i);
      const toml::table* table = array->get(i)->as_table();
      if (table == nullptr) {
        type_error(*array->get(i), path, "a table");
        continue;
      }
      check_keys(*table, path, route_keys);
      RouteConfig route;
      route.where = location_of(*table);
      std::string host;
      if (const auto* host_node = read_string(*table, "host", path + ".host", host)) {
        if (auto pattern = normalize_host_pattern(host)) {
          route.host = std::move(*pattern);
        } else {
          error(*host_node, path + ".host",
                "invalid host pattern '" + host +
                    "'; expected a name like \"api.example.com\" or \"*.example.com\"");
        }
      }
      if (const auto* prefix =
              read_string(*table, "path_prefix", path + ".path_prefix", route.path_prefix)) {
        if (!route.path_prefix.starts_with('/')) {
          error(*prefix, path + ".path_prefix",
                "must start with '/', got '" + route.path_prefix + "'");
        } else if (route.path_prefix.find_first_of("?# \t\r\n") != std::string::npos) {
          error(*prefix, path + ".path_prefix", "must not contain '?', '#' or whitespace");
        }
      }
      read_route_edge(*table, path, route);
      if (table->contains("return")) {
        route_upstreams_.push_back(nullptr);  // answers itself: no upstream (read_route_edge)
      } else if (require(*table, "upstream", path, "the upstream this route sends to")) {
        route_upstreams_.push_back(
            read_string(*table, "upstream", path + ".upstream", route.upstream));
      } else {
        route_upstreams_.push_back(nullptr);
      }
      read_admission(*table, path, route);
      read_error_pages(*table, path + ".error_pages", route.error_pages);
      answers_only_ = (i == 0 || answers_only_) && table->contains("return");
      const auto [it, inserted] = seen.try_emplace(route.host + '\n' + route.path_prefix, path);
      if (!inserted) {
        error(*table, path, "duplicate route: same host and path_prefix as " + it->second);
      }
      out.push_back(std::move(route));
    }
  }

  // ---- Edge: PROXY protocol, trusted proxies, admission (docs/edge.md) -----------------------
  // All live: a session reads them from the snapshot current when it starts (proxy_protocol,
  // trusted_proxies) or when its request is routed (the rest).
  void read_edge(const toml::table& server, ServerSection& out) {
    read_bool(server, "proxy_protocol", "server.proxy_protocol", out.proxy_protocol);
    read_cidrs(server, "trusted_proxies", "server.trusted_proxies", out.trusted_proxies);
    std::string mode = "off";
    read_choice(server, "forwarded_header", "server.forwarded_header", "forwarded_header mode",
                forwarded_header_modes, mode);
    out.forwarded_header = mode == "add";
    std::string detail = "status";
    read_choice(server, "error_detail", "server.error_detail", "error_detail", error_detail_modes,
                detail);
    out.error_detail = detail == "full" ? ErrorDetail::full : ErrorDetail::status;
    read_error_pages(server, "server.error_pages", out.error_pages);
    const bool any_proxy_listener =
        out.proxy_protocol ||
        std::any_of(out.tls.begin(), out.tls.end(), [](const auto& t) { return t.proxy_protocol; });
    // Without a trusted peer every connection would be refused: surely not what was meant.
    if (any_proxy_listener && out.trusted_proxies.empty()) {
      const toml::node* at = server.get("proxy_protocol");
      error(at != nullptr ? at->source() : server.source(), "server.trusted_proxies",
            "proxy_protocol is on but trusted_proxies is empty: every connection would be "
            "refused; list the balancers' addresses, e.g. [\"10.0.0.0/8\"]");
    }
  }

  // error_pages = { 502 = "FILE", "5xx" = "FILE" }: each file read now (a reload reads it again),
  // so that an answer never touches the disk and a missing file is an error at its key.
  void read_error_pages(const toml::table& parent, const std::string& path, ErrorPages& out) {
    const toml::node* node = parent.get("error_pages");
    if (node == nullptr) {
      note(parent, "error_pages", path, "{}");
      return;
    }
    const toml::table* table = node->as_table();
    if (table == nullptr) {
      type_error(*node, path, "a table like { 502 = \"/etc/sluice/502.html\", \"5xx\" = \"...\" }");
      return;
    }
    std::vector<std::string> written;
    for (auto&& [key, value] : *table) {
      const std::string item_path = path + "." + std::string(key.str());
      const auto& where = key.source().begin.line != 0 ? key.source() : value.source();
      ErrorPage page;
      if (!error_page_status(key.str(), page.status)) {
        error(where, item_path, "expected a status 400..599 or a class \"4xx\" or \"5xx\"");
        continue;
      }
      const auto* file = value.as_string();
      if (file == nullptr) {
        type_error(value, item_path, "a file name");
        continue;
      }
      page.file = file->get();
      if (!read_error_page(value, item_path, page)) continue;
      written.push_back(std::string(key.str()) + " = " + quoted(page.file));
      out.pages.push_back(std::move(page));
    }
    note(parent, "error_pages", path, "{ " + join_strings(written) + " }");
  }

  // "502" (exact) or "5xx" (a class) as ErrorPage::status: only the statuses sluice answers with.
  static bool error_page_status(std::string_view key, unsigned& status) {
    if (key.size() != 3 || (key[0] != '4' && key[0] != '5')) return false;
    if (key[1] == 'x' && key[2] == 'x') {
      status = static_cast<unsigned>(key[0] - '0');
      return true;
    }
    const auto r = std::from_chars(key.data(), key.data() + key.size(), status);
    return r.ec == std::errc() && r.ptr == key.data() + key.size();
  }

  bool read_error_page(const toml::node& node, const std::string& path, ErrorPage& page) {
    if (const int e = read_whole_file(page.file, page.body); e != 0) {
      error(node, path, "cannot read '" + page.file + "': " + std::system_category().message(e));
      return false;
    }
    if (page.body.size() > max_error_page_bytes) {
      error(node, path, "the page '" + page.file + "' is larger than " + format_size(max_error_page_bytes));
      return false;
    }
    const auto dot = page.file.rfind('.');
    const auto ext = dot == std::string::npos ? std::string() : lower(page.file.substr(dot + 1));
    page.content_type = ext == "html" || ext == "htm" ? "text/html; charset=utf-8"
                        : ext == "json"               ? "application/json"
                        : ext == "xml"                ? "application/xml"
                                                      : "text/plain; charset=utf-8";
    return true;
  }

  // An array of "ADDRESS[/BITS]" strings.
  void read_cidrs(const toml::table& table, std::string_view key, const std::string& path,
                  CidrSet& out) {
    const toml::node* node = table.get(key);
    std::vector<std::string> written;
    if (node != nullptr) {
      if (const toml::array* array = node->as_array()) {
        for (std::size_t i = 0; i < array->size(); ++i) {
          const auto* text = array->get(i)->as_string();
          std::string why;
          if (text == nullptr) {
            type_error(*array->get(i), index_path(path, i), "a string like \"10.0.0.0/8\"");
          } else if (auto cidr = parse_cidr(text->get(), &why)) {
            out.push_back(*cidr);
            written.push_back(quoted(cidr->to_string()));
          } else {
            error(*array->get(i), index_path(path, i), why);
          }
        }
      } else {
        type_error(*node, path, "an array of addresses or ranges like [\"10.0.0.0/8\"]");
      }
    }
    note(table, key, path, "[" + join_strings(written) + "]");
  }

  void read_admission(const toml::table& route_table, const std::string& path, RouteConfig& route) {
    read_cidrs(route_table, "allow", path + ".allow", route.allow);
    read_cidrs(route_table, "deny", path + ".deny", route.deny);
    const toml::node* node = route_table.get("rate_limit");
    if (node == nullptr) return;
    const toml::table* table = node->as_table();
    if (table == nullptr) {
      type_error(*node, path + ".rate_limit",
                 "a table like { rate = \"100/s\", burst = 200, key = \"client_ip\" }");
      return;
    }
    const std::string p = path + ".rate_limit";
    check_keys(*table, p, rate_limit_keys);
    RateLimitConfig limit;
    bool ok = require(*table, "rate", p, "requests per unit, like \"100/s\"");
    const auto* rate = typed<std::string>(*table, "rate", p + ".rate", "a string like \"100/s\"");
    if (rate != nullptr && !parse_rate(rate->get(), limit)) {
      error(*rate, p + ".rate",
            "expected COUNT/s, COUNT/m or COUNT/h with COUNT 1..1000000, got '" + rate->get() + "'");
    }
    ok = ok && rate != nullptr && parse_rate(rate->get(), limit);
    limit.burst = static_cast<std::uint32_t>(std::min<std::uint64_t>(limit.count, 10'000'000));
    ok &= table->get("burst") == nullptr ||
          take_integer(*table, "burst", p + ".burst", limit.burst, 1, 10'000'000, {}) != nullptr;
    ok &= table->get("max_keys") == nullptr ||
          take_integer(*table, "max_keys", p + ".max_keys", limit.max_keys, 16, 16'777'216, {}) != nullptr;
    std::string key_text;
    if (const auto* key = take_string(*table, "key", p + ".key", key_text)) {
      using Kind = HashKeySpec::Kind;
      const auto spec = HashKeySpec::parse(key_text);
      const bool fits = spec && (spec->kind == Kind::client_ip ||
                                 (spec->kind == Kind::header && http::is_token(spec->name)));
      if (fits) limit.key = *spec;
      else {
        error(*key, p + ".key", "unknown key '" + key_text + "'; expected client_ip or header:NAME");
        ok = false;
      }
    }
    if (ok) route.rate_limit = limit;
  }

  // "100/s", "20/m", "1000/h".
  static bool parse_rate(std::string_view text, RateLimitConfig& out) {
    const auto slash = text.find('/');
    if (slash == std::string_view::npos || slash == 0) return false;
    std::uint64_t n = 0;
    const auto [end, err] = std::from_chars(text.data(), text.data() + slash, n);
    if (err != std::errc() || end != text.data() + slash || n < 1 || n > 1'000'000) return false;
    const auto unit = text.substr(slash + 1);
    if (unit == "s") out.period = std::chrono::seconds(1);
    else if (unit == "m") out.period = std::chrono::minutes(1);
    else if (unit == "h") out.period = std::chrono::hours(1);
    else return false;
    out.count = n;
    return true;
  }

  void read_upstreams(const toml::table& root, std::vector<UpstreamConfig>& out) {
    const toml::node* node = root.get("upstreams");
    const std::string no_upstream =
        "no upstream defined; add an [upstreams.NAME] section with its servers";
    if (node == nullptr) {
      // A front door that only answers itself (an HTTP -> HTTPS redirector) needs no upstream.
      if (!answers_only_) error(root, "upstreams", no_upstream);
      return;
    }
    const toml::table* table = node->as_table();
    if (table == nullptr) {
      type_error(*node, "upstreams", "a table of upstreams ([upstreams.NAME])");
      return;
    }
    if (table->empty()) error(*table, "upstreams", no_upstream);
    // toml::table iterates in key order; Config::upstreams promises file order.
    std::vector<std::pair<const toml::key*, const toml::node*>> entries;
    for (auto&& [key, value] : *table) entries.emplace_back(&key, &value);
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto& a, const auto& b) { return is_before(*a.second, *b.second); });
    for (const auto& [key, value] : entries) {
      const std::string name(key->str());
      const std::string path = "upstreams." + name;
      if (!all_of_chars(name, upstream_name_char)) {
        error(key->source(), path,
              "upstream name '" + name + "' may use only letters, digits, '-' and '_'");
      }
      const toml::table* upstream = value->as_table();
      if (upstream == nullptr) {
        type_error(*value, path, "a table");
        continue;
      }
      out.push_back(read_upstream(*upstream, name, path));
    }
  }

  // Keys that only one balance policy reads: accepted under another, but said to have no effect.
  void warn_unused_policy_keys(const toml::table& table, const std::string& path,
                               const std::string& balance) {
    if (balance == "hash") return;
    for (const std::string_view key : {"hash_key", "hash_balance_factor"}) {
      if (const toml::node* node = table.get(key))
        warn(*node, path + "." + std::string(key),
             "has no effect: balance is \"" + balance + "\", not \"hash\"");
    }
  }

  UpstreamConfig read_upstream(const toml::table& table, const std::string& name,
                               const std::string& path) {
    check_keys(table, path, upstream_keys);
    UpstreamConfig upstream;
    upstream.name = name;
    upstream.where = location_of(table);
    std::vector<std::string_view> policies(balance_policies.begin(), balance_policies.end());
    read_choice(table, "balance", path + ".balance", "balance policy", policies, upstream.balance);
    read_duration(table, "connect_timeout", path + ".connect_timeout", upstream.connect_timeout,
                  false);
    read_duration(table, "response_timeout", path + ".response_timeout", upstream.response_timeout,
                  false);
    read_duration(table, "send_timeout", path + ".send_timeout", upstream.send_timeout, false);
    // keepalive = 0 turns pooling off; the timeout still has to be a real one.
    read_integer(table, "keepalive", path + ".keepalive", upstream.keepalive, 0, max_keepalive);
    read_duration(table, "keepalive_timeout", path + ".keepalive_timeout",
                  upstream.keepalive_timeout, false);
    read_duration(table, "tunnel_idle_timeout", path + ".tunnel_idle_timeout",
                  upstream.tunnel_idle_timeout, false);
    read_health(table, path, upstream.health);
    read_passive(table, path, upstream.passive);
    read_duration(table, "slow_start", path + ".slow_start", upstream.slow_start, true);
    std::string all_down = "fail";
    read_choice(table, "when_all_down", path + ".when_all_down", "when_all_down policy",
                all_down_policies, all_down);
    upstream.panic_when_all_down = all_down == "panic";
    std::string hash_key;
    if (const auto* node = take_string(table, "hash_key", path + ".hash_key", hash_key)) {
      if (auto spec = HashKeySpec::parse(hash_key)) upstream.hash_key = std::move(*spec);
      else
        error(*node, path + ".hash_key",
              "unknown hash key '" + hash_key +
                  "'; expected client_ip, uri, header:NAME, cookie:NAME or query:NAME");
    }
    note(table, "hash_key", path + ".hash_key", quoted(upstream.hash_key.to_string()));
    read_number(table, "hash_balance_factor", path + ".hash_balance_factor",
                upstream.hash_balance_factor, 0.0, 100.0);
    if (upstream.hash_balance_factor != 0 && upstream.hash_balance_factor < 1.0)
      error(*table.get("hash_balance_factor"), path + ".hash_balance_factor",
            "must be 0 (off) or at least 1.0");
    read_integer(table, "queue_size", path + ".queue_size", upstream.queue_size, 0, 1'000'000);
    read_duration(table, "queue_timeout", path + ".queue_timeout", upstream.queue_timeout, false);
    read_retry(table, path, upstream.retry);
    check_retry_rules(table, path, upstream);
    read_idempotency(table, path, upstream.idempotency);
    read_upstream_tls(table, path, upstream);
    read_header_rules(table, "request_headers", path + ".request_headers", upstream.request_headers);
    read_header_rules(table, "response_headers", path + ".response_headers", upstream.response_headers);
    warn_unused_policy_keys(table, path, upstream.balance);
    read_discover(table, path, upstream);

    // An absent or empty list is allowed: the upstream exists, the proxy answers 503.
    const toml::node* node = table.get("servers");
    if (node == nullptr) return upstream;
    const std::string servers_path = path + ".servers";
    const toml::array* array = node->as_array();
    if (array == nullptr) {
      type_error(*node, servers_path, "an array of tables ([[" + servers_path + "]])");
      return upstream;
    }
    // identity -> the server that has it first
    std::unordered_map<std::string, std::string> identities;
    for (std::size_t i = 0; i < array->size(); ++i) {
      const std::string server_path = index_path(servers_path, i);
      const toml::table* server_table = array->get(i)->as_table();
      if (server_table == nullptr) {
        type_error(*array->get(i), server_path, "a table");
        continue;
      }
      auto server = read_server_entry(*server_table, server_path);
      if (!server) continue;
      server->tls = server->tls || upstream.tls;
      const bool named = !server->name.empty();
      const auto [it, inserted] =
          identities.try_emplace(server->identity(), "servers[" + std::to_string(i) + "]");
      if (!inserted) {
        const std::string key = named ? "name" : "address";
        error(*server_table->get(key), server_path + "." + key,
              "duplicate server '" + server->identity() + "' (also " + it->second +
                  "); each server needs a unique name or address");
      }
      upstream.servers.push_back(std::move(*server));
    }
    return upstream;
  }

  // nullopt when the server has no usable identity (its address is missing or bad).
  std::optional<ServerConfig> read_server_entry(const toml::table& table, const std::string& path) {
    check_keys(table, path, server_entry_keys);
    ServerConfig server;
    server.where = location_of(table);
    if (const auto* name = read_string(table, "name", path + ".name", server.name)) {
      if (!all_of_chars(server.name, server_name_char)) {
        error(*name, path + ".name",
              "server name '" + server.name +
                  "' may use only letters, digits, '-', '_', '.' and ':'");
      }
    }
    read_integer(table, "weight", path + ".weight", server.weight, 1, max_weight,
                 "; to take a server out of rotation, drain it instead of setting weight 0");
    read_bool(table, "backup", path + ".backup", server.backup);
    read_integer(table, "max_conns", path + ".max_conns", server.max_conns, 0, 1'000'000);
    read_bool(table, "drain", path + ".drain", server.drain);
    read_server_resolve(table, path, server);
    if (!require(table, "address", path, "the server's host:port")) return std::nullopt;
    const toml::node& address_node = *table.get("address");
    std::optional<HostPort> address;
    // "https://host:port" puts TLS on this server; "http://" is said for symmetry.
    if (const auto* text = address_node.as_string(); text != nullptr && text->get().find("://") != std::string::npos) {
      std::string_view rest = text->get();
      if (rest.starts_with("https://")) {
        server.tls = true;
        rest.remove_prefix(8);
      } else if (rest.starts_with("http://")) {
        rest.remove_prefix(7);
      } else {
        error(address_node, path + ".address",
              "unknown scheme in '" + text->get() + "'; expected host:port, http://host:port or https://host:port");
        return std::nullopt;
      }
      std::string why;
      address = parse_host_port(rest, false, &why);
      if (!address) error(address_node, path + ".address", why);
      if (address && !server.resolve && !resolvable(address->host, &why)) {
        error(address_node, path + ".address", why);
        address.reset();
      }
    } else {
      address = parse_address(address_node, path + ".address", false, !server.resolve);
    }
    if (!address) return std::nullopt;
    server.address = std::move(*address);
    check_resolve_address(address_node, path, server);
    return server;
  }

  // --- Discovery (discovery/, docs/discovery.md) ---

  void read_server_resolve(const toml::table& table, const std::string& path, ServerConfig& server) {
    read_bool(table, "resolve", path + ".resolve", server.resolve);
    const auto* interval =
        read_duration(table, "resolve_interval", path + ".resolve_interval", server.resolve_interval, false);
    if (interval != nullptr && !server.resolve)
      warn(*interval, path + ".resolve_interval", "has no effect without resolve = true");
  }

  // A `resolve` server's address must be a name: an IP literal has no records to follow.
  void check_resolve_address(const toml::node& node, const std::string& path, const ServerConfig& server) {
    if (!server.resolve) return;
    const auto& host = server.address.host;
    if (boost::urls::parse_ipv4_address(host) || boost::urls::parse_ipv6_address(host))
      error(node, path + ".address",
            "resolve = true needs a DNS name, but '" + host + "' is an IP address");
    else if (!all_of_chars(host, dns_name_char))
      error(node, path + ".address", "'" + host + "' is not a DNS name");
  }

  void read_dns(const toml::table& root, DnsSection& out) {
    const toml::table& table = section_or_empty(root, "dns");
    check_keys(table, "dns", dns_keys);
    if (const toml::node* node = table.get("servers")) {
      if (auto addresses = read_name_servers(*node, "dns.servers")) out.servers = std::move(*addresses);
    }
    note(table, "servers", "dns.servers", addresses_text(out.servers));
    read_duration(table, "timeout", "dns.timeout", out.timeout, false);
    read_integer(table, "attempts", "dns.attempts", out.attempts, 1, 10);
    // The resolver (its name servers, timeout and tries) is made once, at start.
    for (const auto* key : {"dns.servers", "dns.timeout", "dns.attempts"}) needs_restart(key);
    read_duration(table, "min_ttl", "dns.min_ttl", out.min_ttl, false);
    const auto* max = read_duration(table, "max_ttl", "dns.max_ttl", out.max_ttl, false);
    if (max != nullptr && out.max_ttl < out.min_ttl)
      error(*max, "dns.max_ttl",
            "must be at least min_ttl (" + format_duration(out.min_ttl) + "), got " + format_duration(out.max_ttl));
    read_duration(table, "stale_ttl", "dns.stale_ttl", out.stale_ttl, true);
    read_bool(table, "allow_empty", "dns.allow_empty", out.allow_empty);
  }

  void read_reload(const toml::table& root, ReloadSection& out) {
    const toml::table& table = section_or_empty(root, "reload");
    check_keys(table, "reload", reload_keys);
    if (const auto* node = read_duration(table, "watch", "reload.watch", out.watch, true);
        node != nullptr && out.watch > max_reload_watch) {
      error(*node, "reload.watch",
            "must be at most " + format_duration(max_reload_watch) + ", got " + format_duration(out.watch));
      out.watch = ReloadSection{}.watch;
    }
    read_number(table, "failed_percent", "reload.failed_percent", out.failed_percent, 0.1, 100.0);
    read_number(table, "failed_factor", "reload.failed_factor", out.failed_factor, 1.0, 1000.0);
    read_integer(table, "min_requests", "reload.min_requests", out.min_requests, 1, 1'000'000'000);
    read_integer(table, "up_lost_percent", "reload.up_lost_percent", out.up_lost_percent, 1, 100);
  }

  // Name server addresses: IP literals with a port ("127.0.0.1:53", "[::1]:53").
  std::optional<std::vector<HostPort>> read_name_servers(const toml::node& node,
                                                                       const std::string& path) {
    const auto* array = node.as_array();
    if (array == nullptr) {
      type_error(node, path, "an array of \"ip:port\" strings");
      return std::nullopt;
    }
    std::vector<HostPort> out;
    for (std::size_t i = 0; i < array->size(); ++i) {
      const toml::node& item = *array->get(i);
      auto address = parse_address(item, index_path(path, i), false, false);
      if (!address) return std::nullopt;
      if (!boost::urls::parse_ipv4_address(address->host) && !boost::urls::parse_ipv6_address(address->host)) {
        error(item, index_path(path, i), "a name server is an IP address, got '" + address->host + "'");
        return std::nullopt;
      }
      out.push_back(std::move(*address));
    }
    return out;
  }

  // discover = { srv = "_http._tcp.app.service.consul", resolve_interval = "10s" }
  void read_discover(const toml::table& table, const std::string& path, UpstreamConfig& u) {
    const toml::table* discover = section(table, "discover");
    if (discover == nullptr) return;
    const std::string p = path + ".discover";
    check_keys(*discover, p, discover_keys);
    if (!require(*discover, "srv", p, "the SRV name to follow")) return;
    const auto* srv = read_string(*discover, "srv", p + ".srv", u.discover_srv);
    if (srv != nullptr && !all_of_chars(u.discover_srv, dns_name_char))
      error(*srv, p + ".srv", "'" + u.discover_srv + "' is not a DNS name");
    read_duration(*discover, "resolve_interval", p + ".resolve_interval", u.discover_interval, false);
  }

  // What goes where: with routes, every route must name an upstream that exists; without
  // routes, the only upstream takes all traffic, so there must be exactly one.
  void check_routing(const toml::table& root, const Config& config) {
    if (config.upstreams.empty()) return;  // already reported; every route would repeat it
    std::vector<std::string_view> names;
    for (const auto& upstream : config.upstreams) names.push_back(upstream.name);
    if (config.upstreams.size() > 1 && !root.contains("route")) {
      error(*root.get("upstreams"), "route",
            std::to_string(names.size()) + " upstreams (" + join(names) +
                ") but no [[route]] to choose between them; add routes, or keep one upstream");
    }
    for (std::size_t i = 0; i < config.routes.size(); ++i) {
      const toml::node* node = route_upstreams_[i];
      const auto& name = config.routes[i].upstream;
      if (node == nullptr || config.find_upstream(name) != nullptr) continue;
      error(*node, index_path("route", i) + ".upstream", unknown_message("upstream", name, names));
    }
  }

  // ---- edge rules (docs/edge.md): header rules, path rewrites, fixed answers. All live: the
  // snapshot built from the new config compiles them, and the next request uses it.

  // `key` = { set = { "Name" = "value" }, add = { ... }, remove = ["Name"] }.
  void read_header_rules(const toml::table& table, std::string_view key, const std::string& path,
                         HeaderRulesConfig& out) {
    const toml::node* node = table.get(key);
    if (node != nullptr && !node->is_table()) {
      type_error(*node, path, "a table like { set = { \"X-Env\" = \"prod\" }, remove = [\"Server\"] }");
    } else if (node != nullptr) {
      const toml::table& rules = *node->as_table();
      check_keys(rules, path, header_rule_keys);
      read_rule_pairs(rules, "set", path + ".set", out.set);
      read_rule_pairs(rules, "add", path + ".add", out.add);
      if (const auto* names = take_strings(rules, "remove", path + ".remove", out.remove)) {
        for (std::size_t i = 0; i < out.remove.size(); ++i)
          check_rule_name(names->as_array()->get(i)->source(), index_path(path + ".remove", i), out.remove[i]);
      }
    }
    note(table, key, path, header_rules_text(out));
  }

  void read_rule_pairs(const toml::table& rules, std::string_view key, const std::string& path,
                       std::vector<std::pair<std::string, std::string>>& out) {
    const toml::node* node = rules.get(key);
    if (node == nullptr) return;
    const toml::table* table = node->as_table();
    if (table == nullptr) {
      type_error(*node, path, "a table of \"Name\" = \"value\"");
      return;
    }
    std::vector<std::pair<const toml::key*, const toml::node*>> entries;
    for (auto&& [name, value] : *table) entries.emplace_back(&name, &value);
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto& a, const auto& b) { return is_before(*a.second, *b.second); });
    for (const auto& [name, value] : entries) {
      const std::string item_path = path + "." + std::string(name->str());
      check_rule_name(name->source(), item_path, name->str());
      const auto* text = value->as_string();
      if (text == nullptr) {
        type_error(*value, item_path, "a string");
        continue;
      }
      std::string why;
      if (!http::Template::parse(text->get(), http::TemplateText::field_value, &why))
        error(*value, item_path, why);
      out.emplace_back(std::string(name->str()), text->get());
    }
  }

  void check_rule_name(const toml::source_region& where, const std::string& path, std::string_view name) {
    if (!http::is_token(name)) {
      error(where, path, "'" + std::string(name) +
                             "' is not a header name (RFC 9110 §5.6.2: letters, digits and !#$%&'*+-.^_`|~)");
    } else if (const auto why = http::reserved_header(name)) {
      error(where, path, "header '" + std::string(name) + "' cannot be changed by a rule: it " + std::string(*why));
    }
  }

  static std::string header_rules_text(const HeaderRulesConfig& rules) {
    const auto table = [](const std::vector<std::pair<std::string, std::string>>& pairs) {
      std::vector<std::string> items;
      for (const auto& [name, value] : pairs) items.push_back(quoted(name) + " = " + quoted(value));
      return "{ " + join_strings(items) + " }";
    };
    std::vector<std::string> removed;
    for (const auto& name : rules.remove) removed.push_back(quoted(name));
    return "{ set = " + table(rules.set) + ", add = " + table(rules.add) + ", remove = [" +
           join_strings(removed) + "] }";
  }

  // A route's rules, path rewrite and `return`; a route that answers itself forwards nothing, so
  // the keys about forwarding are refused there rather than silently ignored.
  void read_route_edge(const toml::table& table, const std::string& path, RouteConfig& route) {
    read_header_rules(table, "request_headers", path + ".request_headers", route.request_headers);
    read_header_rules(table, "response_headers", path + ".response_headers", route.response_headers);
    read_bool(table, "strip_prefix", path + ".strip_prefix", route.strip_prefix);
    if (const auto* node = read_string(table, "rewrite_prefix", path + ".rewrite_prefix", route.rewrite_prefix)) {
      const auto& r = route.rewrite_prefix;
      const bool visible = std::all_of(r.begin(), r.end(), [](char c) { return c > 0x20 && c < 0x7f; });
      if (!r.starts_with('/') || !visible || r.find_first_of("?#") != std::string::npos) {
        error(*node, path + ".rewrite_prefix",
              "must start with '/' and hold no '?', '#', spaces or control characters, got '" + r + "'");
      } else if (route.strip_prefix) {
        error(*node, path + ".rewrite_prefix",
              "strip_prefix and rewrite_prefix exclude each other (strip_prefix = true is rewrite_prefix = \"/\")");
      }
    }
    read_return(table, path, route);
    if (!route.answer) return;
    for (const std::string_view key : {"upstream", "strip_prefix", "rewrite_prefix", "request_headers"}) {
      if (const toml::node* node = table.get(key))
        error(*node, path + "." + std::string(key),
              "a route with return answers itself and forwards nothing; remove " + std::string(key));
    }
  }

  // return = { status = 301, location = "https://$host$request_uri" } | { status = 503, body = "..." }
  void read_return(const toml::table& table, const std::string& path, RouteConfig& route) {
    const toml::node* node = table.get("return");
    if (node == nullptr) return;
    const std::string p = path + ".return";
    const toml::table* t = node->as_table();
    if (t == nullptr) {
      type_error(*node, p, "a table like { status = 301, location = \"https://$host$request_uri\" }");
      return;
    }
    check_keys(*t, p, return_keys);
    ReturnConfig r;
    const toml::node* status = nullptr;
    if (require(*t, "status", p, "the status to answer with"))
      status = take_integer(*t, "status", p + ".status", r.status, 200, 599,
                            "; a 1xx is an interim answer, not a final one");
    std::string why;
    const toml::node* location = take_string(*t, "location", p + ".location", r.location);
    if (location != nullptr && !http::Template::parse(r.location, http::TemplateText::uri, &why))
      error(*location, p + ".location", why);
    const bool redirect = r.status >= 300 && r.status < 400;
    if (status != nullptr && redirect && r.location.empty())
      error(*status, p + ".status", "a " + std::to_string(r.status) + " answer needs a location");
    const toml::node* body = take_string(*t, "body", p + ".body", r.body);
    if (body != nullptr && !http::Template::parse(r.body, http::TemplateText::body, &why))
      error(*body, p + ".body", why);
    if (body != nullptr && !r.body.empty() && (r.status == 204 || r.status == 304))
      error(*body, p + ".body", "a " + std::to_string(r.status) + " answer has no body (RFC 9110 §15.3.5, §15.4.5)");
    if (const auto* type = take_string(*t, "content_type", p + ".content_type", r.content_type);
        type != nullptr && (r.content_type.empty() ||
                            !http::Template::parse(r.content_type, http::TemplateText::field_value, &why) ||
                            r.content_type.find('$') != std::string::npos)) {
      error(*type, p + ".content_type", "must be a media type like \"text/html; charset=utf-8\" (no variables)");
    }
    route.answer = std::move(r);
  }

  std::string file_;
  std::vector<ConfigError> errors_;
  std::vector<ConfigError> warnings_;
  std::vector<KeyValue> keys_;
  // listen_key -> key path of the listener that has it
  std::unordered_map<std::string, std::string> listeners_;
  // Per route, its `upstream` value node (nullptr when missing or mistyped), for check_routing.
  std::vector<const toml::node*> route_upstreams_;
  bool answers_only_ = false;  // there are routes, and every one has `return`
};

std::string plural(std::size_t count, std::string_view noun) {
  return std::to_string(count) + " " + std::string(noun) + (count == 1 ? "" : "s");
}

}  // namespace

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
                             static_cast<int>(e.source().begin.column), "",
                             std::string(e.description())});
    return result;
  }
  Builder builder(source);
  Config config = builder.build(root);
  result.errors = builder.take_errors();
  result.warnings = builder.take_warnings();
  if (result.errors.empty()) {
    config.text = std::string(toml_text);
    result.config = std::move(config);
  }
  return result;
}

LoadResult load_file(const std::string& path) {
  const auto unreadable = [&](int error_number) {
    LoadResult result;
    result.errors.push_back(
        {path, 0, 0, "", "cannot read: " + std::system_category().message(error_number)});
    return result;
  };
  std::string text;
  if (const int error = read_whole_file(path, text); error != 0) return unreadable(error);
  return load_string(text, path);
}

std::string summary(const Config& config) {
  std::size_t servers = 0;
  for (const auto& upstream : config.upstreams) servers += upstream.servers.size();
  const std::string source = config.source.empty() ? "<config>" : config.source;
  std::size_t tls = 0;
  for (const auto& t : config.server.tls) tls += t.listen.size();
  return source + ": ok: " + plural(config.server.listen.size() + tls, "listener") +
         (tls != 0 ? " (" + std::to_string(tls) + " TLS)" : "") + ", " +
         plural(config.upstreams.size(), "upstream") + " (" + plural(servers, "server") + "), " +
         plural(config.routes.size(), "route") + ", " +
         (config.admin.enabled ? "admin " + config.admin.listen.to_string() : "no admin");
}

}  // namespace sluice::config
