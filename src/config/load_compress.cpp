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

std::string codings_text(const compress::Preference& preference) {
  std::vector<std::string> items;
  for (const Coding c : preference.order()) items.push_back(toml_string(compress::token(c)));
  return "[" + join_strings(items) + "]";
}

std::string levels_text(const L& l) {
  return "{ gzip = " + std::to_string(l.gzip) + ", zstd = " + std::to_string(l.zstd) + ", br = " + std::to_string(l.br) +
         " }";
}

// The bounds are the libraries' own (compress::level_range).
const KeySpec level_rows[] = {
    integer_key<&L::gzip>("gzip", compress::level_range(Coding::gzip).min, compress::level_range(Coding::gzip).max,
                          "gzip (zlib) level."),
    integer_key<&L::zstd>("zstd", compress::level_range(Coding::zstd).min, compress::level_range(Coding::zstd).max,
                          "zstd level."),
    integer_key<&L::br>("br", compress::level_range(Coding::br).min, compress::level_range(Coding::br).max,
                        "brotli quality."),
};

void read_codings(Reader& r, const toml::node& node, const std::string& p, compress::Preference& preference) {
  std::vector<std::string> words;
  if (!r.take_strings(node, p, words)) return;
  std::array<std::string_view, coding_values.size()> coding_words;
  for (std::size_t i = 0; i < coding_values.size(); ++i) coding_words[i] = compress::token(coding_values[i]);
  std::vector<Coding> order;
  bool good = true;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const auto* item = node.as_array()->get(i);
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
    r.error(node, p, "an empty list offers no coding; to compress nothing, leave compress out (or compress = false)");
  else if (good)
    preference = compress::Preference(order);
}

// Each entry lower-cased; a bad one is reported at its index.
void read_types(Reader& r, const toml::node& node, const std::string& p, std::vector<std::string>& types) {
  if (!r.take_strings(node, p, types)) return;
  if (types.empty())
    r.error(node, p, "an empty list compresses nothing; to compress nothing, leave compress out (or compress = false)");
  for (std::size_t i = 0; i < types.size(); ++i) {
    std::string& type = types[i];
    if (!compress::valid_media_range(type))
      r.error(*node.as_array()->get(i), index_path(p, i),
              "'" + type + "' is not a media range; expected \"type/subtype\" or \"type/*\" (no parameters)");
    type = lower(type);
  }
}

void read_levels(Reader& r, const toml::node& node, const std::string& p, L& levels) {
  const toml::table* table = r.table_at(&node, p);
  if (table == nullptr) return;
  r.walk(*table, p, level_rows, &levels);
  r.record(*table, p, level_rows, &levels);
}

const KeySpec compress_rows[] = {
    value_key<&P::preference, read_codings, codings_text>("codings",
                                                           "Codings offered, preferred first (of zstd, br, gzip).")
        .docs("array of strings"),
    value_key<&P::types, read_types>("types", "Media types compressed: \"type/subtype\" or \"type/*\".")
        .docs("array of strings"),
    size_key<&P::min_bytes>("min_bytes", 0, GiB, "A response whose Content-Length is below this is sent as it is."),
    value_key<&P::levels, read_levels, levels_text>("level", "Levels per coding: { gzip, zstd, br }.").docs("table"),
};

}  // namespace compress_section

const KeyTable compress_table = compress_section::compress_rows;
const KeyTable compress_level_table = compress_section::level_rows;

// The effective policy's keys are recorded under `compress.`; the row itself says whether it is on.
std::string compress_text(const CompressConfig& c) { return c ? "{}" : "false"; }
std::string route_compress_text(const std::optional<CompressConfig>& c) { return c ? compress_text(*c) : std::string(); }

void read_compress(Reader& r, const toml::node& node, const std::string& p, CompressConfig& out) {
  if (const auto* flag = node.as_boolean()) {
    if (!flag->get()) return out.reset();
    return r.error(node, p, "expected a table ({ codings, types, min_bytes, level }; {} = the defaults) or false");
  }
  const toml::table* table = node.as_table();
  if (table == nullptr) return r.type_error(node, p, "a table ({ codings, types, min_bytes, level }) or false");
  out.emplace();
  r.walk(*table, p, compress_section::compress_rows, &*out);
  r.record(*table, p, compress_section::compress_rows, &*out);
}

void read_route_compress(Reader& r, const toml::node& node, const std::string& path, std::optional<CompressConfig>& out) {
  read_compress(r, node, path, out.emplace());
}

}  // namespace sluice::config
