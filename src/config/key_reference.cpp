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
  return "see above";
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

std::string key_reference_markdown() {
  using namespace key_reference_detail;
  std::string out;
  for (const auto& section : all_sections()) {
    const std::string open = section.array ? "[[" : "[", close = section.array ? "]]" : "]";
    out += "### `" + open + std::string(section.path) + close + "`\n\n";
    out += "| key | type | default | bounds | reload | meaning |\n|---|---|---|---|---|---|\n";
    for (const auto& k : section.keys) {
      std::string value = value_text(k, section.defaults);
      // Durations and sizes are TOML strings; the index shows them as they are written.
      if (k.type == KeyType::duration || k.type == KeyType::size) value = "\"" + value + "\"";
      out += "| `" + std::string(k.name) + "` | " + std::string(type_text(k)) + " | " +
             (value.empty() ? std::string() : "`" + cell(value) + "`") + " | " + cell(bounds_text(k)) + " | " +
             (k.reload == Reload::restart ? "**restart**" : "live") + " | " + cell(k.doc) + " |\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace sluice::config
