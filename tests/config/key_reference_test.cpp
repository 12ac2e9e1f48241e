// docs/configuration.md's key tables are what the loader's key tables generate: a key added, a
// bound or a reload class changed in a table without regenerating the page fails here.
// Regenerate: SLUICE_WRITE_DOCS=1 build/release/sluice_tests --gtest_filter='KeyReference*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sluice/config/key_spec.hpp"

namespace sluice::config {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view end_marker = "<!-- END keys -->\n";

std::string begin_marker(const SectionSpec& section) {
  return "<!-- BEGIN keys: " + std::string(section.path) + " -->\n";
}

fs::path doc_path() {
  // tests/config/ -> the repository root.
  return fs::path(__FILE__).parent_path().parent_path().parent_path() / "docs" / "configuration.md";
}

// Every section's table sits between its markers; with SLUICE_WRITE_DOCS the page is rewritten.
TEST(KeyReference, TheCommittedTablesAreWhatTheKeyTablesGenerate) {
  std::ifstream in(doc_path());
  ASSERT_TRUE(in) << doc_path();
  std::stringstream text;
  text << in.rdbuf();
  std::string doc = text.str();
  const bool write = std::getenv("SLUICE_WRITE_DOCS") != nullptr;
  for (const auto& section : all_sections()) {
    const auto begin = doc.find(begin_marker(section));
    ASSERT_NE(begin, std::string::npos) << "no key table for " << section.path << " in " << doc_path();
    const auto from = begin + begin_marker(section).size();
    const auto end = doc.find(end_marker, from);
    ASSERT_NE(end, std::string::npos);
    const std::string generated = key_table_markdown(section);
    if (write) doc.replace(from, end - from, generated);
    else
      EXPECT_EQ(doc.substr(from, end - from), generated)
          << "docs/configuration.md's table of " << section.path << " differs from the key table; regenerate "
          << "with SLUICE_WRITE_DOCS=1 build/release/sluice_tests --gtest_filter='KeyReference*'";
  }
  if (write) std::ofstream(doc_path()) << doc;
}

// A name is one row: a second would be read twice and documented twice.
TEST(KeyReference, NoTableNamesAKeyTwice) {
  for (const auto& section : all_sections())
    for (std::size_t i = 0; i < section.keys.size(); ++i)
      for (std::size_t j = i + 1; j < section.keys.size(); ++j)
        EXPECT_NE(section.keys[i].name, section.keys[j].name) << section.path;
}

TEST(KeyReference, EverySectionAndKeyIsListed) {
  const auto text = key_reference_markdown();
  for (const auto& section : all_sections()) {
    EXPECT_NE(text.find(std::string(section.path) + (section.array ? "]]`" : "]`")), std::string::npos)
        << section.path;
    for (const auto& key : section.keys)
      EXPECT_NE(text.find("| `" + std::string(key.name) + "` |"), std::string::npos) << key.name;
  }
  EXPECT_NE(text.find("| `workers` | integer | `0` | 0..1024 | **restart** |"), std::string::npos);
}

}  // namespace
}  // namespace sluice::config
