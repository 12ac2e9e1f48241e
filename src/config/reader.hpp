#pragma once
// The loader's shared state and its one walker (private to src/config): each section's reader
// (load_<section>.cpp) declares its key table and calls walk() for the table's typed keys, then
// checks what relates several keys, then record() for `check --diff`. Every problem is collected
// with its position; a bad value leaves the default in place so that the walk goes on.
#include <optional>
#include <stdexcept>
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

// What walk() read from one table: per row, the node of a present, valid value (else nullptr).
// Rows are found by the member they fill (at<&Section::member>()), so that code relating keys
// never writes a key's name again.
class Read {
public:
  Read(const toml::table& table, std::string path, KeyTable spec, std::vector<const toml::node*> nodes)
      : table_(&table), path_(std::move(path)), spec_(spec), nodes_(std::move(nodes)) {}
  template <auto M>
  const toml::node* at() const {
    return nodes_[index<M>()];
  }
  // The key's path ("upstreams.app.retry.backoff").
  template <auto M>
  std::string path() const {
    return child_path(path_, spec_[index<M>()].name);
  }
  // Where a rule about the key is reported: its value as written, else the table.
  template <auto M>
  const toml::node& where() const {
    const toml::node* node = table_->get(spec_[index<M>()].name);
    return node != nullptr ? *node : *table_;
  }
  // In the file, valid or not.
  template <auto M>
  bool present() const {
    return table_->contains(spec_[index<M>()].name);
  }
  const toml::node* operator[](const KeySpec& row) const;
  const toml::table& table() const { return *table_; }
  const std::string& path() const { return path_; }

private:
  template <auto M>
  std::size_t index() const {
    for (std::size_t i = 0; i < spec_.size(); ++i)
      if (spec_[i].is<M>()) return i;
    throw std::logic_error("no key table row for this member");
  }

  const toml::table* table_;
  std::string path_;
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
  void missing(const toml::table& table, const std::string& path, std::string_view what);
  // A sub-table's node as a table; nullptr when absent or not a table (reported).
  const toml::table* table_at(const toml::node* node, const std::string& path);
  // The same, or an empty table when absent: its keys are read at their defaults.
  const toml::table& table_or_empty(const toml::node* node, const std::string& path);

  // Unknown keys, then every typed row of `spec` present in `table` into `object` (the section
  // struct the rows point into).
  Read walk(const toml::table& table, const std::string& path, KeyTable spec, void* object);
  // Every row's effective value (the default when the file leaves the key out) and reload class.
  void record(const toml::table& table, const std::string& path, KeyTable spec, const void* object);

  // Primitive readers of a node: false (reported) when it is not of the type; `out` set only when good.
  bool take_string(const toml::node& node, const std::string& path, std::string& out,
                   std::string_view expected = "a string");
  const toml::node* take_integer(const toml::node& node, const std::string& path, std::int64_t& out,
                                 std::int64_t min, std::int64_t max, std::string_view below_min_hint = {});
  bool take_strings(const toml::node& node, const std::string& path, std::vector<std::string>& out);
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
  // Loads a certificate and its key the way the runtime will, reporting at the file's key: the
  // rows of `cert` and `key` in `read`.
  template <auto Cert, auto Key>
  void check_key_pair(const Read& read, const std::string& cert, const std::string& key) {
    if (read.at<Cert>() == nullptr || read.at<Key>() == nullptr) return;
    if (const auto problem = key_pair_problem(cert, key)) {
      if (problem->first) error(read.where<Cert>(), read.path<Cert>(), problem->second);
      else error(read.where<Key>(), read.path<Key>(), problem->second);
    }
  }
  // (about the certificate?, message), or nullopt when the pair loads.
  static std::optional<std::pair<bool, std::string>> key_pair_problem(const std::string& cert, const std::string& key);
  // `passive.fail_on` and `retry.on`: one grammar, every bad item reported at its index.
  void check_failure_items(const toml::node& node, const std::string& path, const std::vector<std::string>& items,
                           RetryConfig* retry);

  std::vector<ConfigError> take_errors();
  std::vector<ConfigError> take_warnings() { return std::move(warnings_); }
  std::vector<KeyValue> take_keys() { return std::move(keys_); }
  const std::string& file() const { return file_; }

  // Per route, its `upstream` value node (nullptr when missing, mistyped or answering itself)
  // and path, for check_routing.
  std::vector<std::pair<const toml::node*, std::string>> route_upstreams;
  bool answers_only = false;  // there are routes, and every one has `return`

private:
  const toml::node* walk_one(const toml::table& table, const std::string& path, const KeySpec& k, void* object);
  void check_rules(const toml::table& table, const std::string& path, KeyTable spec, const void* object,
                   const std::vector<const toml::node*>& nodes);
  const toml::node* take_choice(const toml::node& node, const std::string& path, const KeySpec& k, void* object);
  const toml::node* take_duration(const toml::node& node, const std::string& path, const KeySpec& k, Duration& out);
  const toml::node* take_size(const toml::node& node, const std::string& path, const KeySpec& k, std::uint64_t& out);
  const toml::node* take_number(const toml::node& node, const std::string& path, const KeySpec& k, double& out);
  void add_retried_grpc_code(const toml::node& at, const std::string& path, std::string_view item,
                             RetryConfig& retry);
  void add_retried_statuses(const toml::node& at, const std::string& path, const health::StatusMatcher& statuses,
                            RetryConfig& retry);

  std::string file_;
  std::vector<ConfigError> errors_;
  std::vector<ConfigError> warnings_;
  std::vector<KeyValue> keys_;
  // listen_key -> key path of the listener that has it
  std::unordered_map<std::string, std::string> listeners_;
};

// A custom row whose value has its own grammar: Parse(Reader&, node, path, T& member) reads it,
// Text(const T&) prints it (none: not recorded).
template <auto M, auto Parse, auto Text = nullptr>
constexpr KeySpec value_key(std::string_view name, std::string_view doc) {
  using S = key_spec_detail::owner_t<M>;
  std::string (*format)(const void*) = nullptr;
  if constexpr (!std::is_null_pointer_v<decltype(Text)>)
    format = [](const void* s) -> std::string { return Text(static_cast<const S*>(s)->*M); };
  return custom_key<M>(
      name, [](Reader& r, const toml::node& n, const std::string& p, void* s) { Parse(r, n, p, static_cast<S*>(s)->*M); },
      format, doc);
}

// An array of tables ([[route]], or [{...}, ...]): `item(table, path)` reads each; `what` and
// `item_what` say what was expected when the array or an item is not one.
template <class Item>
void read_tables(Reader& r, const toml::node& node, const std::string& path, std::string_view what,
                 std::string_view item_what, Item item) {
  const toml::array* array = node.as_array();
  if (array == nullptr) return r.type_error(node, path, what);
  for (std::size_t i = 0; i < array->size(); ++i) {
    const toml::table* table = array->get(i)->as_table();
    if (table == nullptr) r.type_error(*array->get(i), index_path(path, i), item_what);
    else item(*table, index_path(path, i));
  }
}

// Value grammars shared by several sections.
// { set = {...}, add = {...}, remove = [...] }
void parse_header_rules(Reader& r, const toml::node& node, const std::string& path, HeaderRulesConfig& out);
// [ "ADDRESS[/BITS]", ... ], each bad item reported at its index.
void parse_cidrs(Reader& r, const toml::node& node, const std::string& path, CidrSet& out);
// { 502 = "FILE", "5xx" = "FILE" }: each file read now (a reload reads it again).
void parse_error_pages(Reader& r, const toml::node& node, const std::string& path, ErrorPages& out);
// A string; `out` set when it is one.
void parse_string(Reader& r, const toml::node& node, const std::string& path, std::string& out);
// Helpers for a custom row's Text.
inline std::string quoted(const std::string& text) { return toml_string(text); }

inline constexpr std::string_view no_upstream_message =
    "no upstream defined; add an [upstreams.NAME] section with its servers";

// The sections, each in its own file (load_<section>.cpp): each reads the table at `node`.
void read_server(Reader& r, const toml::node& node, const std::string& path, ServerSection& out);
void read_log(Reader& r, const toml::node& node, const std::string& path, LogSection& out);
void read_admin(Reader& r, const toml::node& node, const std::string& path, AdminSection& out);
void read_dns(Reader& r, const toml::node& node, const std::string& path, DnsSection& out);
void read_acme_section(Reader& r, const toml::node& node, const std::string& path, AcmeSection& out);
void read_reload(Reader& r, const toml::node& node, const std::string& path, ReloadSection& out);
void read_fleet(Reader& r, const toml::node& node, const std::string& path, FleetSection& out);
void read_routes(Reader& r, const toml::node& node, const std::string& path, std::vector<RouteConfig>& out);
void read_upstreams(Reader& r, const toml::node& node, const std::string& path, std::vector<UpstreamConfig>& out);
void read_health(Reader& r, const toml::node& node, const std::string& path, std::optional<HealthCheckConfig>& out);
void read_passive(Reader& r, const toml::node& node, const std::string& path, PassiveConfig& out);
// Reads the whole upstream's timeouts too: its rules relate retry keys to them.
void read_retry(Reader& r, const toml::node& node, const std::string& path, void* upstream);
void read_idempotency(Reader& r, const toml::node& node, const std::string& path, idempotency::Config& out);
// `compress` of an upstream or a route: a contained nullopt for `compress = false` (an
// upstream's then compresses nothing, a route's inherits its upstream's when the key is absent).
void read_route_compress(Reader& r, const toml::node& node, const std::string& path, std::optional<CompressConfig>& out);
void read_compress(Reader& r, const toml::node& node, const std::string& path, CompressConfig& out);
std::string compress_text(const CompressConfig& c);
std::string route_compress_text(const std::optional<CompressConfig>& c);

// The tables, for docs (key_spec.hpp, all_sections).
extern const KeyTable server_table;
extern const KeyTable tls_listener_table;
extern const KeyTable log_table;
extern const KeyTable admin_table;
extern const KeyTable dns_table;
extern const KeyTable acme_table;
extern const KeyTable acme_listener_table;
extern const KeyTable reload_table;
extern const KeyTable fleet_table;
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
