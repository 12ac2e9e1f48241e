#pragma once
// The loader's shared state and its one walker (private to src/config): each section's reader
// (load_<section>.cpp) declares its key table and calls walk() for the table's typed keys, then
// checks what relates several keys, then record() for `check --diff`. Every problem is collected
// with its position; a bad value leaves the default in place so that the walk goes on.
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <toml++/toml.h>

#include "sluice/config/key_spec.hpp"
#include "sluice/config/loader.hpp"

namespace sluice::config {

using WordList = std::span<const std::string_view>;

std::string lower(std::string_view text);
std::string toml_string(std::string_view text);
std::string join_strings(const std::vector<std::string>& items);
std::string join_words(WordList items);
std::string child_path(std::string_view parent, std::string_view key);
std::string index_path(std::string_view parent, std::size_t index);
SourceLocation location_of(const toml::node& node);
bool is_before(const toml::node& a, const toml::node& b);
bool all_of_chars(std::string_view text, bool (*allowed)(char));
bool dns_char(char c);
bool dns_name_char(char c);
// One wording for unknown keys and unknown enumerated values alike, with a did-you-mean.
std::string unknown_message(std::string_view kind, std::string_view value, WordList valid);
// "api.example.com" or "*.example.com", lower-cased; nullopt when it is neither.
std::optional<std::string> normalize_host_pattern(std::string_view text);
// A listen list as written in TOML.
std::string addresses_text(const std::vector<HostPort>& addresses);
// Header rules and address ranges as written in TOML.
std::string header_rules_text(const HeaderRulesConfig& rules);
std::string cidrs_text(const CidrSet& set);
std::string error_pages_text(const ErrorPages& pages);
// The entries of a table in file order (toml::table iterates in key order).
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& table);

// What walk() read: per row of the table, the node of a present, valid value (else nullptr).
class Read {
public:
  Read(KeyTable spec, std::vector<const toml::node*> nodes) : spec_(spec), nodes_(std::move(nodes)) {}
  const toml::node* operator[](std::string_view key) const;

private:
  KeyTable spec_;
  std::vector<const toml::node*> nodes_;
};

class Reader {
public:
  explicit Reader(std::string_view file) : file_(file) {}

  void error(const toml::source_region& where, std::string key_path, std::string message);
  void error(const toml::node& node, std::string key_path, std::string message);
  // A valid key with no effect (or a deprecated one): accepted, and check and run say so.
  void warn(const toml::node& node, std::string key_path, std::string message);
  void type_error(const toml::node& node, std::string key_path, std::string_view expected);
  std::size_t error_count() const { return errors_.size(); }

  // Unknown keys of `table` under `path`, each with a did-you-mean from the table's names.
  void check_keys(const toml::table& table, std::string_view path, KeyTable spec);
  void check_keys(const toml::table& table, std::string_view path, WordList known);
  // Reports a required key that is absent, at the table that lacks it.
  bool require(const toml::table& table, std::string_view key, std::string_view path, std::string_view what);
  // The sub-table at `key`; nullptr when absent or not a table (reported).
  const toml::table* section(const toml::table& parent, std::string_view key);
  // The sub-table at `key`, or an empty one when absent: its keys are read at their defaults.
  const toml::table& section_or_empty(const toml::table& parent, std::string_view key);

  // Unknown keys, then every typed row of `spec` present in `table` into `object` (the section
  // struct the rows point into).
  Read walk(const toml::table& table, const std::string& path, KeyTable spec, void* object);
  // Every row's effective value (the default when the file leaves the key out) and reload class.
  void record(const toml::table& table, const std::string& path, KeyTable spec, const void* object);
  void note(const toml::table& table, std::string_view key, const std::string& path, std::string value,
            Reload reload = Reload::live);

  // Primitive readers: nullptr when absent or bad (reported); `out` is set only when good.
  template <typename T>
  const toml::value<T>* typed(const toml::table& table, std::string_view key, const std::string& path,
                              std::string_view expected) {
    const toml::node* node = table.get(key);
    if (node == nullptr) return nullptr;
    if (const auto* value = node->as<T>()) return value;
    type_error(*node, path, expected);
    return nullptr;
  }
  const toml::node* take_string(const toml::table& table, std::string_view key, const std::string& path,
                                std::string& out);
  const toml::node* take_integer(const toml::table& table, std::string_view key, const std::string& path,
                                 std::int64_t& out, std::int64_t min, std::int64_t max,
                                 std::string_view below_min_hint = {});
  const toml::node* take_strings(const toml::table& table, std::string_view key, const std::string& path,
                                 std::vector<std::string>& out);
  // `key` = [ "ADDRESS[/BITS]", ... ] into `out`, each bad item reported at its index.
  void read_cidrs(const toml::table& table, std::string_view key, const std::string& path, CidrSet& out);
  // `resolvable_now` false: a name resolved later through [dns] (a `resolve` server), which the
  // system resolver that `check` would ask may not know.
  std::optional<HostPort> parse_address(const toml::node& node, const std::string& path, bool zero_port_allowed,
                                        bool resolvable_now = true);
  // A resolvable host, or why not (reported by the caller).
  static bool resolvable(const std::string& host, std::string* why);
  // Two sockets cannot bind one address; the second bind would fail at start-up, far from here.
  // `quiet`: a default address, claimed only when free.
  void claim_listener(const HostPort& address, const toml::source_region& where, const std::string& path,
                      bool quiet = false);
  // A listen address or an array of them, each claimed. The addresses when all are valid.
  std::optional<std::vector<HostPort>> read_listen_addresses(const toml::node& node, const std::string& path,
                                                             bool empty_allowed);
  // error_pages = { 502 = "FILE", "5xx" = "FILE" }: each file read now (a reload reads it again).
  void read_error_pages(const toml::table& parent, const std::string& path, ErrorPages& out);
  // `key` = { set = {...}, add = {...}, remove = [...] }.
  void read_header_rules(const toml::table& table, std::string_view key, const std::string& path,
                         HeaderRulesConfig& out);
  // Loads a certificate and its key the way the runtime will, reporting at the file's key.
  void check_key_pair(const toml::node& cert_node, const toml::node& key_node, const std::string& path,
                      std::string_view cert_key, std::string_view key_key, const std::string& cert,
                      const std::string& key);
  // `passive.fail_on` and `retry.on`: one grammar, every bad item reported at its index.
  void check_failure_items(const toml::node& node, const std::string& path, const std::vector<std::string>& items,
                           RetryConfig* retry);

  std::vector<ConfigError> take_errors();
  std::vector<ConfigError> take_warnings() { return std::move(warnings_); }
  std::vector<KeyValue> take_keys() { return std::move(keys_); }
  const std::string& file() const { return file_; }

  // Per route, its `upstream` value node (nullptr when missing or mistyped), for check_routing.
  std::vector<const toml::node*> route_upstreams;
  bool answers_only = false;  // there are routes, and every one has `return`

private:
  const toml::node* walk_one(const toml::table& table, const std::string& path, const KeySpec& k, void* object);
  const toml::node* take_choice(const toml::node& node, const std::string& path, const KeySpec& k, void* object);
  const toml::node* take_duration(const toml::node& node, const std::string& path, const KeySpec& k, Duration& out);
  const toml::node* take_size(const toml::node& node, const std::string& path, const KeySpec& k, std::uint64_t& out);
  const toml::node* take_number(const toml::node& node, const std::string& path, const KeySpec& k, double& out);
  void read_rule_pairs(const toml::table& rules, std::string_view key, const std::string& path,
                       std::vector<std::pair<std::string, std::string>>& out);
  void check_rule_name(const toml::source_region& where, const std::string& path, std::string_view name);
  bool read_error_page(const toml::node& node, const std::string& path, ErrorPage& page);
  void add_retried_statuses(const toml::node& at, const std::string& path, const health::StatusMatcher& statuses,
                            RetryConfig& retry);

  std::string file_;
  std::vector<ConfigError> errors_;
  std::vector<ConfigError> warnings_;
  std::vector<KeyValue> keys_;
  // listen_key -> key path of the listener that has it
  std::unordered_map<std::string, std::string> listeners_;
};

// The sections, each in its own file (load_<section>.cpp).
void read_server(Reader& r, const toml::table& root, ServerSection& out);
void read_log(Reader& r, const toml::table& root, LogSection& out);
void read_admin(Reader& r, const toml::table& root, AdminSection& out);
void read_dns(Reader& r, const toml::table& root, DnsSection& out);
void read_reload(Reader& r, const toml::table& root, ReloadSection& out);
void read_routes(Reader& r, const toml::table& root, std::vector<RouteConfig>& out);
void read_upstreams(Reader& r, const toml::table& root, std::vector<UpstreamConfig>& out);
void read_health(Reader& r, const toml::table& upstream, const std::string& path,
                 std::optional<HealthCheckConfig>& out);
void read_passive(Reader& r, const toml::table& upstream, const std::string& path, PassiveConfig& out);
void read_retry(Reader& r, const toml::table& upstream, const std::string& path, UpstreamConfig& u);
void read_idempotency(Reader& r, const toml::table& upstream, const std::string& path, idempotency::Config& c);
// `compress` of an upstream or a route: nullopt when absent (an upstream's then compresses
// nothing, a route's inherits its upstream's); a contained nullopt for `compress = false`.
// The key's name in both tables (load_upstream.cpp, load_route.cpp).
inline constexpr std::string_view compress_key = "compress";
std::optional<CompressConfig> read_compress(Reader& r, const toml::table& parent, const std::string& path);
std::string compress_text(const CompressConfig& c);

// The tables, for the unknown-key check of the root and for docs (key_spec.hpp, all_sections).
extern const KeyTable server_table;
extern const KeyTable tls_listener_table;
extern const KeyTable log_table;
extern const KeyTable admin_table;
extern const KeyTable dns_table;
extern const KeyTable reload_table;
extern const KeyTable route_table;
extern const KeyTable upstream_table;
extern const KeyTable server_entry_table;
extern const KeyTable health_table;
extern const KeyTable passive_table;
extern const KeyTable retry_table;
extern const KeyTable idempotency_table;
extern const KeyTable compress_table;
extern const KeyTable compress_level_table;

}  // namespace sluice::config
