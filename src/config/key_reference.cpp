// docs/configuration.md's key index, generated from the key tables (key_spec.hpp).
#include <cstdio>

#include "reader.hpp"
#include "sluice/config/units.hpp"

namespace sluice::config {

namespace key_reference_detail {

std::string_view type_text(const KeySpec& k) {
  switch (k.type) {
    case KeyType::string: return "string";
    case KeyType::boolean: return "boolean";
    case KeyType::integer: return "integer";
    case KeyType::duration: return "duration";
    case KeyType::size: return "size";
    case KeyType::number: return "number";
    case KeyType::choice: return "string";
    case KeyType::strings: return "array of strings";
    case KeyType::custom: break;
  }
  return "table";
}

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string bounds_text(const KeySpec& k) {
  switch (k.type) {
    case KeyType::integer: return std::to_string(k.min) + ".." + std::to_string(k.max);
    case KeyType::size:
      if (k.size_max == std::numeric_limits<std::uint64_t>::max()) return "any";
      return format_size(k.size_min) + ".." + format_size(k.size_max);
    case KeyType::duration: return std::string(k.zero_allowed ? "≥ 0" : "> 0") + ", ≤ " + format_duration(k.duration_max);
    case KeyType::number: return number_text(k.number_min) + ".." + number_text(k.number_max);
    case KeyType::choice: {
      std::string out;
      for (const auto word : k.words) out += (out.empty() ? "`" : ", `") + std::string(word) + "`";
      return out;
    }
    default: return {};
  }
}

// A table cell: a literal bar is written `\|` (docs/configuration.md's convention).
std::string cell(std::string_view text) {
  std::string out;
  for (const char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace key_reference_detail

std::string key_table_markdown(const SectionSpec& section) {
  using namespace key_reference_detail;
  std::string out = "| key | type | default | bounds | reload | meaning |\n|---|---|---|---|---|---|\n";
  for (const auto& k : section.keys) {
    std::string value = k.default_doc.empty() ? value_text(k, section.defaults) : std::string(k.default_doc);
    // Durations and sizes are TOML strings; the tables show them as they are written.
    if (k.default_doc.empty() && (k.type == KeyType::duration || k.type == KeyType::size)) value = "\"" + value + "\"";
    if (k.default_doc.empty() && !value.empty()) value = "`" + cell(value) + "`";
    const std::string type = k.type_doc.empty() ? std::string(type_text(k)) : std::string(k.type_doc);
    const std::string bounds = k.bounds_doc.empty() ? bounds_text(k) : std::string(k.bounds_doc);
    out += "| `" + std::string(k.name) + "` | " + type + " | " + (k.required.empty() ? value : "— (required)") +
           " | " + cell(bounds) + " | " + (k.reload == Reload::restart ? "**restart**" : "live") + " | " + cell(k.doc) +
           " |\n";
  }
  return out;
}

std::string key_reference_markdown() {
  std::string out;
  for (const auto& section : all_sections()) {
    const std::string open = section.array ? "[[" : "[", close = section.array ? "]]" : "]";
    out += "### `" + open + std::string(section.path) + close + "`\n\n" + key_table_markdown(section) + "\n";
  }
  return out;
}

}  // namespace sluice::config
