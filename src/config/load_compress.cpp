// `compress = { codings, types, min_bytes, level = { gzip, zstd, br } }` of an upstream or a route:
// which responses are compressed, and how (docs/compression.md).
#include <algorithm>

#include "reader.hpp"
#include "sluice/compress/coding.hpp"

namespace sluice::config {

namespace compress_section {

using P = compress::Policy;
using L = compress::Levels;
using compress::Coding;

constexpr std::array<Coding, 3> coding_values{Coding::zstd, Coding::br, Coding::gzip};

std::string codings_text(const void* p) {
  std::vector<std::string> items;
  for (const Coding c : static_cast<const P*>(p)->preference.order()) items.push_back(toml_string(compress::token(c)));
  return "[" + join_strings(items) + "]";
}

std::string levels_text(const void* p) {
  const L& l = static_cast<const P*>(p)->levels;
  return "{ gzip = " + std::to_string(l.gzip) + ", zstd = " + std::to_string(l.zstd) + ", br = " + std::to_string(l.br) +
         " }";
}

// Rows the reader below parses itself, named once here.
constexpr KeySpec codings_row = custom_key("codings", codings_text, "Codings offered, preferred first (of zstd, br, gzip).");
constexpr KeySpec types_row = strings_key<&P::types>("types", "Media types compressed: \"type/subtype\" or \"type/*\".");
constexpr KeySpec level_row = custom_key("level", levels_text, "Levels per coding: { gzip, zstd, br }.");

const KeySpec compress_rows[] = {
    codings_row,
    types_row,
    size_key<&P::min_bytes>("min_bytes", 0, GiB, "A response whose Content-Length is below this is sent as it is."),
    level_row,
};

// The bounds are the libraries' own (compress::level_range).
const KeySpec level_rows[] = {
    integer_key<&L::gzip>("gzip", compress::level_range(Coding::gzip).min, compress::level_range(Coding::gzip).max,
                          "gzip (zlib) level."),
    integer_key<&L::zstd>("zstd", compress::level_range(Coding::zstd).min, compress::level_range(Coding::zstd).max,
                          "zstd level."),
    integer_key<&L::br>("br", compress::level_range(Coding::br).min, compress::level_range(Coding::br).max,
                        "brotli quality."),
};

void read_codings(Reader& r, const toml::table& table, const std::string& p, P& policy) {
  std::vector<std::string> words;
  const toml::node* node = r.take_strings(table, codings_row.name, p, words);
  if (node == nullptr) return;
  std::array<std::string_view, coding_values.size()> coding_words;
  for (std::size_t i = 0; i < coding_values.size(); ++i) coding_words[i] = compress::token(coding_values[i]);
  std::vector<Coding> order;
  bool good = true;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const auto* item = node->as_array()->get(i);
    const auto at = std::find(coding_words.begin(), coding_words.end(), lower(words[i]));
    if (at == coding_words.end()) {
      r.error(*item, index_path(p, i), unknown_message("coding", words[i], coding_words));
      good = false;
    } else if (const Coding c = coding_values[at - coding_words.begin()];
               std::find(order.begin(), order.end(), c) != order.end()) {
      r.error(*item, index_path(p, i), "'" + words[i] + "' is listed twice");
      good = false;
    } else {
      order.push_back(c);
    }
  }
  if (good && order.empty())
    r.error(*node, p, "an empty list offers no coding; to compress nothing, leave compress out (or compress = false)");
  else if (good)
    policy.preference = compress::Preference(order);
}

// Each entry lower-cased; a bad one is reported at its index.
void check_types(Reader& r, const toml::node& node, const std::string& p, P& policy) {
  if (policy.types.empty())
    r.error(node, p, "an empty list compresses nothing; to compress nothing, leave compress out (or compress = false)");
  for (std::size_t i = 0; i < policy.types.size(); ++i) {
    std::string& type = policy.types[i];
    if (!compress::valid_media_range(type))
      r.error(*node.as_array()->get(i), index_path(p, i),
              "'" + type + "' is not a media range; expected \"type/subtype\" or \"type/*\" (no parameters)");
    type = lower(type);
  }
}

void read_levels(Reader& r, const toml::table& table, const std::string& p, P& policy) {
  const toml::table* levels = r.section(table, level_row.name);
  if (levels == nullptr) return;
  r.walk(*levels, p, level_rows, &policy.levels);
  r.record(*levels, p, level_rows, &policy.levels);
}

P read_policy(Reader& r, const toml::table& table, const std::string& p) {
  P policy;
  const Read read = r.walk(table, p, compress_rows, &policy);
  if (read[codings_row.name] != nullptr) read_codings(r, table, child_path(p, codings_row.name), policy);
  if (const auto* node = read[types_row.name]) check_types(r, *node, child_path(p, types_row.name), policy);
  read_levels(r, table, child_path(p, level_row.name), policy);
  r.record(table, p, compress_rows, &policy);
  return policy;
}

}  // namespace compress_section

const KeyTable compress_table = compress_section::compress_rows;
const KeyTable compress_level_table = compress_section::level_rows;

// The effective policy's keys are recorded under `compress.`; the row itself says whether it is on.
std::string compress_text(const CompressConfig& c) { return c ? "{}" : "false"; }

std::optional<CompressConfig> read_compress(Reader& r, const toml::table& parent, const std::string& path) {
  const toml::node* node = parent.get(compress_key);
  if (node == nullptr) return std::nullopt;
  const std::string p = child_path(path, compress_key);
  if (const auto* flag = node->as_boolean()) {
    if (!flag->get()) return CompressConfig{};
    r.error(*node, p, "expected a table ({ codings, types, min_bytes, level }; {} = the defaults) or false");
    return std::nullopt;
  }
  const toml::table* table = node->as_table();
  if (table == nullptr) {
    r.type_error(*node, p, "a table ({ codings, types, min_bytes, level }) or false");
    return std::nullopt;
  }
  return CompressConfig{compress_section::read_policy(r, *table, p)};
}

}  // namespace sluice::config
