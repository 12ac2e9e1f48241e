#include "reader.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>
#include <numeric>
#include <system_error>

#include <netdb.h>
#include <sys/socket.h>

#include <boost/url/ipv4_address.hpp>
#include <boost/url/ipv6_address.hpp>

#include "sluice/config/units.hpp"
#include "sluice/core/file.hpp"
#include "sluice/core/grpc_codes.hpp"
#include "sluice/http/chars.hpp"
#include "sluice/http/edge_rules.hpp"
#include "sluice/tls/context.hpp"

namespace sluice::config {

namespace reader_detail {

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
std::optional<std::string_view> closest(std::string_view word, WordList candidates) {
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

std::string format_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string listen_key(const HostPort& address) { return lower(address.host) + ":" + std::to_string(address.port); }

bool visible_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// "502" (exact) or "5xx" (a class) as ErrorPage::status: only the statuses sluice answers with.
bool error_page_status(std::string_view key, unsigned& status) {
  if (key.size() != 3 || (key[0] != '4' && key[0] != '5')) return false;
  if (key[1] == 'x' && key[2] == 'x') {
    status = static_cast<unsigned>(key[0] - '0');
    return true;
  }
  const auto r = std::from_chars(key.data(), key.data() + key.size(), status);
  return r.ec == std::errc() && r.ptr == key.data() + key.size();
}

// An error page is sent whole from memory with each answer it serves.
constexpr std::uint64_t max_error_page_bytes = 1 * MiB;

bool read_error_page(Reader& r, const toml::node& node, const std::string& path, ErrorPage& page) {
  if (const int e = read_whole_file(page.file, page.body); e != 0) {
    r.error(node, path, "cannot read '" + page.file + "': " + std::system_category().message(e));
    return false;
  }
  if (page.body.size() > max_error_page_bytes) {
    r.error(node, path, "the page '" + page.file + "' is larger than " + format_size(max_error_page_bytes));
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

}  // namespace reader_detail

using namespace reader_detail;

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string toml_string(std::string_view text) { return "\"" + std::string(text) + "\""; }

std::string join_strings(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string join_words(WordList items) {
  std::string out;
  for (const auto item : items) out += (out.empty() ? "" : ", ") + std::string(item);
  return out;
}

std::string unknown_message(std::string_view kind, std::string_view value, WordList valid) {
  std::string message = "unknown " + std::string(kind) + " '" + std::string(value) + "'";
  if (const auto guess = closest(value, valid)) return message + "; did you mean '" + std::string(*guess) + "'?";
  if (valid.empty()) return message;
  return message + "; expected one of: " + join_words(valid);
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

bool dns_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

bool dns_name_char(char c) { return dns_char(c) || c == '.'; }

// RFC 9110 §4.2.3 compares hosts case-insensitively, so the router can compare bytes.
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

std::string addresses_text(const std::vector<HostPort>& addresses) {
  std::vector<std::string> items;
  for (const auto& a : addresses) items.push_back(toml_string(a.to_string()));
  return "[" + join_strings(items) + "]";
}

std::string header_rules_text(const HeaderRulesConfig& rules) {
  const auto table = [](const std::vector<std::pair<std::string, std::string>>& pairs) {
    std::vector<std::string> items;
    for (const auto& [name, value] : pairs) items.push_back(toml_string(name) + " = " + toml_string(value));
    return "{ " + join_strings(items) + " }";
  };
  std::vector<std::string> removed;
  for (const auto& name : rules.remove) removed.push_back(toml_string(name));
  return "{ set = " + table(rules.set) + ", add = " + table(rules.add) + ", remove = [" + join_strings(removed) +
         "] }";
}

std::string error_pages_text(const ErrorPages& pages) {
  if (pages.empty()) return "{}";
  std::vector<std::string> items;
  for (const auto& p : pages.pages)
    items.push_back((p.status < 10 ? std::to_string(p.status) + "xx" : std::to_string(p.status)) + " = " +
                    toml_string(p.file));
  return "{ " + join_strings(items) + " }";
}

std::string cidrs_text(const CidrSet& set) {
  std::vector<std::string> items;
  for (const auto& c : set) items.push_back(toml_string(c.to_string()));
  return "[" + join_strings(items) + "]";
}

std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& table) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (auto&& [key, value] : table) entries.emplace_back(&key, &value);
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return is_before(*a.second, *b.second); });
  return entries;
}

const toml::node* Read::operator[](const KeySpec& row) const {
  for (std::size_t i = 0; i < spec_.size(); ++i)
    if (spec_[i].name == row.name) return nodes_[i];
  return nullptr;
}

void Reader::error(const toml::source_region& where, std::string key_path, std::string message) {
  // Every parsed node has a position; the fallback only keeps "FILE:0:0" out of messages.
  const int line = std::max(1, static_cast<int>(where.begin.line));
  const int column = std::max(1, static_cast<int>(where.begin.column));
  errors_.push_back({file_, line, column, std::move(key_path), std::move(message)});
}

void Reader::error(const toml::node& node, std::string key_path, std::string message) {
  error(node.source(), std::move(key_path), std::move(message));
}

void Reader::warn(const toml::node& node, std::string key_path, std::string message) {
  const auto& where = node.source();
  warnings_.push_back({file_, std::max(1, static_cast<int>(where.begin.line)),
                       std::max(1, static_cast<int>(where.begin.column)), std::move(key_path), std::move(message)});
}

void Reader::type_error(const toml::node& node, std::string key_path, std::string_view expected) {
  error(node, std::move(key_path), "expected " + std::string(expected) + ", got " + std::string(type_name(node)));
}

void Reader::check_keys(const toml::table& table, std::string_view path, KeyTable spec) {
  std::vector<std::string_view> names;
  for (const auto& k : spec) names.push_back(k.name);
  check_keys(table, path, WordList(names));
}

void Reader::check_keys(const toml::table& table, std::string_view path, WordList known) {
  for (auto&& [key, value] : table) {
    if (std::find(known.begin(), known.end(), key.str()) != known.end()) continue;
    const auto& where = key.source().begin.line != 0 ? key.source() : value.source();
    error(where, child_path(path, key.str()), unknown_message("key", key.str(), known));
  }
}

void Reader::missing(const toml::table& table, const std::string& path, std::string_view what) {
  error(table, path, "required key is missing (" + std::string(what) + ")");
}

const toml::table* Reader::table_at(const toml::node* node, const std::string& path) {
  if (node == nullptr) return nullptr;
  if (const auto* table = node->as_table()) return table;
  type_error(*node, path, "a table");
  return nullptr;
}

const toml::table& Reader::table_or_empty(const toml::node* node, const std::string& path) {
  static const toml::table empty;
  const toml::table* table = table_at(node, path);
  return table != nullptr ? *table : empty;
}

// Typed rows first, then custom ones (whose grammar may read a typed sibling: a server's
// address reads its `resolve`), then the rows' rules, which may read any of them.
Read Reader::walk(const toml::table& table, const std::string& path, KeyTable spec, void* object) {
  static const toml::table empty;
  check_keys(table, path, spec);
  std::vector<const toml::node*> nodes(spec.size());
  for (std::size_t i = 0; i < spec.size(); ++i)
    if (spec[i].type != KeyType::custom) nodes[i] = walk_one(table, child_path(path, spec[i].name), spec[i], object);
  for (std::size_t i = 0; i < spec.size(); ++i) {
    const auto& k = spec[i];
    if (k.type != KeyType::custom) continue;
    nodes[i] = table.get(k.name);
    if (nodes[i] == nullptr && !k.required.empty()) missing(table, child_path(path, k.name), k.required);
    if (k.parse == nullptr || (nodes[i] == nullptr && !k.always)) continue;
    const std::size_t before = errors_.size();
    k.parse(*this, nodes[i] != nullptr ? *nodes[i] : empty, child_path(path, k.name), object);
    if (errors_.size() != before) nodes[i] = nullptr;  // reported: not a valid value
  }
  check_rules(table, path, spec, object, nodes);
  return Read(table, path, spec, std::move(nodes));
}

void Reader::check_rules(const toml::table& table, const std::string& path, KeyTable spec, const void* object,
                         const std::vector<const toml::node*>& nodes) {
  for (std::size_t i = 0; i < spec.size(); ++i) {
    const auto& k = spec[i];
    if (k.type != KeyType::custom && nodes[i] == nullptr && !k.required.empty() && !table.contains(k.name))
      missing(table, child_path(path, k.name), k.required);
    if (k.check == nullptr || (nodes[i] == nullptr && (!k.check_always || table.contains(k.name)))) continue;
    if (auto message = k.check(object); !message.empty())
      error(nodes[i] != nullptr ? *nodes[i] : static_cast<const toml::node&>(table), child_path(path, k.name),
            std::move(message));
  }
}

const toml::node* Reader::walk_one(const toml::table& table, const std::string& path, const KeySpec& k,
                                   void* object) {
  const toml::node* node = table.get(k.name);
  if (node == nullptr) return nullptr;
  switch (k.type) {
    case KeyType::custom: return node;
    case KeyType::string: return take_string(*node, path, *static_cast<std::string*>(k.ref(object))) ? node : nullptr;
    case KeyType::strings:
      return take_strings(*node, path, *static_cast<std::vector<std::string>*>(k.ref(object))) ? node : nullptr;
    case KeyType::boolean: {
      const auto* value = node->as_boolean();
      if (value == nullptr) type_error(*node, path, "true or false");
      else *static_cast<bool*>(k.ref(object)) = value->get();
      return value;
    }
    case KeyType::integer: {
      std::int64_t number = 0;
      const toml::node* good = take_integer(*node, path, number, k.min, k.max, k.below_min_hint);
      if (good != nullptr) k.set(object, number);
      return good;
    }
    case KeyType::choice: return take_choice(*node, path, k, object);
    case KeyType::duration: return take_duration(*node, path, k, *static_cast<Duration*>(k.ref(object)));
    case KeyType::size: return take_size(*node, path, k, *static_cast<std::uint64_t*>(k.ref(object)));
    case KeyType::number: return take_number(*node, path, k, *static_cast<double*>(k.ref(object)));
  }
  return nullptr;
}

const toml::node* Reader::take_choice(const toml::node& node, const std::string& path, const KeySpec& k,
                                      void* object) {
  const auto* text = node.as_string();
  if (text == nullptr) {
    type_error(node, path, "a string");
    return nullptr;
  }
  const auto it = std::find(k.words.begin(), k.words.end(), text->get());
  if (it == k.words.end()) {
    error(node, path, unknown_message(k.kind.empty() ? k.name : k.kind, text->get(), k.words));
    return nullptr;
  }
  k.set(object, it - k.words.begin());
  return &node;
}

const toml::node* Reader::take_duration(const toml::node& node, const std::string& path, const KeySpec& k,
                                        Duration& out) {
  const auto* value = node.as_string();
  if (value == nullptr) {
    // The default doubles as the example of what to write.
    type_error(node, path, "a string like \"" + format_duration(out) + "\"");
    return nullptr;
  }
  std::string why;
  const auto duration = parse_duration(value->get(), &why);
  if (!duration) error(node, path, why);
  else if (*duration == Duration::zero() && !k.zero_allowed) error(node, path, "must be greater than 0s");
  else if (*duration > k.duration_max)
    error(node, path, "must be at most " + format_duration(k.duration_max) + ", got " + format_duration(*duration));
  else {
    out = *duration;
    return &node;
  }
  return nullptr;
}

// Sizes are strings with a unit, or integers counting bytes.
const toml::node* Reader::take_size(const toml::node& node, const std::string& path, const KeySpec& k,
                                    std::uint64_t& out) {
  std::optional<std::uint64_t> bytes;
  if (const auto* text = node.as_string()) {
    std::string why;
    bytes = parse_size(text->get(), &why);
    if (!bytes) error(node, path, why);
  } else if (const auto* integer = node.as_integer()) {
    if (integer->get() < 0) error(node, path, "must not be negative, got " + std::to_string(integer->get()));
    else bytes = static_cast<std::uint64_t>(integer->get());
  } else {
    type_error(node, path, "a size like \"" + format_size(out) + "\" or an integer number of bytes");
  }
  if (!bytes) return nullptr;
  if (*bytes < k.size_min || *bytes > k.size_max) {
    error(node, path,
          "must be between " + format_size(k.size_min) + " and " + format_size(k.size_max) + ", got " +
              format_size(*bytes));
    return nullptr;
  }
  out = *bytes;
  return &node;
}

// A number, integer or float.
const toml::node* Reader::take_number(const toml::node& node, const std::string& path, const KeySpec& k,
                                      double& out) {
  double number = 0;
  if (const auto* f = node.as_floating_point()) number = f->get();
  else if (const auto* i = node.as_integer()) number = static_cast<double>(i->get());
  else {
    type_error(node, path, "a number");
    return nullptr;
  }
  if (!(number >= k.number_min && number <= k.number_max)) {
    error(node, path,
          "must be between " + format_number(k.number_min) + " and " + format_number(k.number_max) + ", got " +
              format_number(number));
    return nullptr;
  }
  out = number;
  return &node;
}

std::string value_text(const KeySpec& k, const void* object) {
  void* member = k.ref != nullptr ? k.ref(const_cast<void*>(object)) : nullptr;
  switch (k.type) {
    case KeyType::custom: return k.format != nullptr ? k.format(object) : std::string();
    case KeyType::string: return toml_string(*static_cast<const std::string*>(member));
    case KeyType::boolean: return *static_cast<const bool*>(member) ? "true" : "false";
    case KeyType::integer: return std::to_string(k.get(object));
    case KeyType::choice: return toml_string(k.words[static_cast<std::size_t>(k.get(object))]);
    case KeyType::duration: return format_duration(*static_cast<const Duration*>(member));
    case KeyType::size: return format_size(*static_cast<const std::uint64_t*>(member));
    case KeyType::number: return format_number(*static_cast<const double*>(member));
    case KeyType::strings: {
      std::vector<std::string> items;
      for (const auto& item : *static_cast<const std::vector<std::string>*>(member)) items.push_back(toml_string(item));
      return "[" + join_strings(items) + "]";
    }
  }
  return {};
}

void Reader::record(const toml::table& table, const std::string& path, KeyTable spec, const void* object) {
  for (const auto& k : spec) {
    if (k.type == KeyType::custom && k.format == nullptr) continue;
    const toml::node* node = table.get(k.name);
    keys_.push_back({child_path(path, k.name), value_text(k, object), k.reload,
                     node != nullptr ? location_of(*node) : SourceLocation{}});
  }
}

bool Reader::take_string(const toml::node& node, const std::string& path, std::string& out,
                         std::string_view expected) {
  const auto* value = node.as_string();
  if (value == nullptr) type_error(node, path, expected);
  else out = value->get();
  return value != nullptr;
}

void parse_string(Reader& r, const toml::node& node, const std::string& path, std::string& out) {
  r.take_string(node, path, out);
}

const toml::node* Reader::take_integer(const toml::node& node, const std::string& path, std::int64_t& out,
                                       std::int64_t min, std::int64_t max, std::string_view below_min_hint) {
  const auto* value = node.as_integer();
  if (value == nullptr) {
    type_error(node, path, "an integer");
    return nullptr;
  }
  const std::int64_t number = value->get();
  if (number < min || number > max) {
    error(*value, path,
          "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " +
              std::to_string(number) + (number < min ? std::string(below_min_hint) : ""));
    return nullptr;
  }
  out = number;
  return value;
}

bool Reader::take_strings(const toml::node& node, const std::string& path, std::vector<std::string>& out) {
  const auto* array = node.as_array();
  if (array == nullptr) {
    type_error(node, path, "an array of strings");
    return false;
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
      return false;
    }
  }
  out = std::move(items);
  return true;
}

void parse_cidrs(Reader& r, const toml::node& node, const std::string& path, CidrSet& out) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    r.type_error(node, path, "an array of addresses or ranges like [\"10.0.0.0/8\"]");
    return;
  }
  for (std::size_t i = 0; i < array->size(); ++i) {
    const auto* text = array->get(i)->as_string();
    std::string why;
    if (text == nullptr) r.type_error(*array->get(i), index_path(path, i), "a string like \"10.0.0.0/8\"");
    else if (auto cidr = parse_cidr(text->get(), &why)) out.push_back(*cidr);
    else r.error(*array->get(i), index_path(path, i), why);
  }
}

std::optional<HostPort> Reader::parse_address(const toml::node& node, const std::string& path,
                                              bool zero_port_allowed, bool resolvable_now) {
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

// The runtime resolves every host when it builds sockets; a name it could not resolve is an
// error here, at the key, so that `check` refuses what `run` and a reload would. A dotted
// number that is no IPv4 address ("999.1.1.1") is said so rather than sent to DNS. Fuzz builds
// (SLUICE_CONFIG_NO_DNS) skip the lookup: they must stay hermetic.
bool Reader::resolvable(const std::string& host, std::string* why) {
  if (boost::urls::parse_ipv4_address(host) || boost::urls::parse_ipv6_address(host)) return true;
  if (std::all_of(host.begin(), host.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; })) {
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

void Reader::claim_listener(const HostPort& address, const toml::source_region& where, const std::string& path,
                            bool quiet) {
  const auto [it, inserted] = listeners_.try_emplace(listen_key(address), path);
  if (!inserted && !quiet) error(where, path, "duplicate listen address " + address.to_string() + " (also " + it->second + ")");
}

std::optional<std::vector<HostPort>> Reader::read_listen_addresses(const toml::node& node, const std::string& path,
                                                                   bool empty_allowed) {
  std::vector<std::pair<const toml::node*, std::string>> items;
  if (node.is_string()) {
    items.emplace_back(&node, path);
  } else if (const auto* array = node.as_array()) {
    if (array->empty() && !empty_allowed) {
      error(node, path, "at least one listen address is required");
      return std::nullopt;
    }
    for (std::size_t i = 0; i < array->size(); ++i) items.emplace_back(array->get(i), index_path(path, i));
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

void parse_error_pages(Reader& r, const toml::node& node, const std::string& path, ErrorPages& out) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    r.type_error(node, path, "a table like { 502 = \"/etc/sluice/502.html\", \"5xx\" = \"...\" }");
    return;
  }
  for (auto&& [key, value] : *table) {
    const std::string item_path = path + "." + std::string(key.str());
    const auto& where = key.source().begin.line != 0 ? key.source() : value.source();
    ErrorPage page;
    if (!error_page_status(key.str(), page.status)) {
      r.error(where, item_path, "expected a status 400..599 or a class \"4xx\" or \"5xx\"");
      continue;
    }
    if (r.take_string(value, item_path, page.file, "a file name") && read_error_page(r, value, item_path, page))
      out.pages.push_back(std::move(page));
  }
}


namespace reader_detail {

void check_rule_name(Reader& r, const toml::source_region& where, const std::string& path, std::string_view name) {
  if (!http::is_token(name)) {
    r.error(where, path,
            "'" + std::string(name) + "' is not a header name (RFC 9110 §5.6.2: letters, digits and !#$%&'*+-.^_`|~)");
  } else if (const auto why = http::reserved_header(name)) {
    r.error(where, path, "header '" + std::string(name) + "' cannot be changed by a rule: it " + std::string(*why));
  }
}

// { "Name" = "value template", ... } in file order.
void parse_rule_pairs(Reader& r, const toml::node& node, const std::string& path,
                      std::vector<std::pair<std::string, std::string>>& out) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    r.type_error(node, path, "a table of \"Name\" = \"value\"");
    return;
  }
  for (const auto& [name, value] : in_file_order(*table)) {
    const std::string item_path = path + "." + std::string(name->str());
    check_rule_name(r, name->source(), item_path, name->str());
    std::string text;
    if (!r.take_string(*value, item_path, text)) continue;
    std::string why;
    if (!http::Template::parse(text, http::TemplateText::field_value, &why)) r.error(*value, item_path, why);
    out.emplace_back(std::string(name->str()), std::move(text));
  }
}

void parse_removed(Reader& r, const toml::node& node, const std::string& path, std::vector<std::string>& out) {
  if (!r.take_strings(node, path, out)) return;
  for (std::size_t i = 0; i < out.size(); ++i)
    check_rule_name(r, node.as_array()->get(i)->source(), index_path(path, i), out[i]);
}

const KeySpec header_rule_rows[] = {
    value_key<&HeaderRulesConfig::set, parse_rule_pairs>("set", "Headers set, replacing any of that name."),
    value_key<&HeaderRulesConfig::add, parse_rule_pairs>("add", "Headers added beside any of that name."),
    value_key<&HeaderRulesConfig::remove, parse_removed>("remove", "Headers removed."),
};

}  // namespace reader_detail

void parse_header_rules(Reader& r, const toml::node& node, const std::string& path, HeaderRulesConfig& out) {
  if (!node.is_table()) {
    r.type_error(node, path, "a table like { set = { \"X-Env\" = \"prod\" }, remove = [\"Server\"] }");
    return;
  }
  r.walk(*node.as_table(), path, header_rule_rows, &out);
}

std::optional<std::pair<bool, std::string>> Reader::key_pair_problem(const std::string& cert, const std::string& key) {
  const auto problem = tls::check_certified_key(cert, key);
  if (!problem) return std::nullopt;
  return std::pair{problem->file == tls::FileProblem::File::cert, problem->message};
}

// With `retry`, the items also fill its conditions; a retried status must be an error (400..599).
void Reader::check_failure_items(const toml::node& node, const std::string& path,
                                 const std::vector<std::string>& items, RetryConfig* retry) {
  const auto* array = node.as_array();
  for (std::size_t i = 0; i < items.size(); ++i) {
    const toml::node& at = array != nullptr ? *array->get(i) : node;
    if (retry != nullptr && items[i].starts_with(grpc_item_prefix)) {
      add_retried_grpc_code(at, index_path(path, i), items[i], *retry);
      continue;
    }
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

// "grpc:unavailable": a gRPC code by its name (any case), 1..16 (OK is no failure).
void Reader::add_retried_grpc_code(const toml::node& at, const std::string& path, std::string_view item,
                                   RetryConfig& retry) {
  const auto name = item.substr(grpc_item_prefix.size());
  const auto code = grpc_code_of_name(name);
  if (code != 0 && code < grpc_code_count) {
    retry.on_grpc |= 1u << code;
    return;
  }
  std::vector<std::string> names;
  for (std::size_t c = 1; c < grpc_code_count; ++c) names.push_back(lower(grpc_code_names[c]));
  error(at, path, "unknown gRPC code '" + std::string(name) + "' (OK is no failure); expected grpc: and one of " + join_strings(names));
}

void Reader::add_retried_statuses(const toml::node& at, const std::string& path,
                                  const health::StatusMatcher& statuses, RetryConfig& retry) {
  for (unsigned code = 100; code < 400; ++code) {
    if (!statuses.match(code)) continue;
    error(at, path, "a retried status must be 400..599, got " + std::to_string(code));
    return;
  }
  for (unsigned code = 400; code < 600; ++code)
    if (statuses.match(code) &&
        std::find(retry.on_status.begin(), retry.on_status.end(), code) == retry.on_status.end())
      retry.on_status.push_back(code);
}

std::vector<ConfigError> Reader::take_errors() {
  // Errors in file order, the order a reader fixes them in.
  std::stable_sort(errors_.begin(), errors_.end(), [](const auto& a, const auto& b) {
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
  return std::move(errors_);
}

}  // namespace sluice::config
