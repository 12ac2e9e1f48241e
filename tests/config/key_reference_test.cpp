// docs/configuration.md's key index is what the key tables generate: a key added, a bound or a
// reload class changed in a table without regenerating the page fails here.
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

constexpr std::string_view begin_marker = "<!-- BEGIN key index: generated from src/config tables -->\n";
constexpr std::string_view end_marker = "<!-- END key index -->\n";

fs::path doc_path() {
  // tests/config/ -> the repository root.
  return fs::path(__FILE__).parent_path().parent_path().parent_path() / "docs" / "configuration.md";
}

TEST(KeyReference, TheCommittedDocIsWhatTheTablesGenerate) {
  std::ifstream in(doc_path());
  ASSERT_TRUE(in) << doc_path();
  std::stringstream text;
  text << in.rdbuf();
  std::string doc = text.str();
  const auto begin = doc.find(begin_marker);
  const auto end = doc.find(end_marker);
  ASSERT_NE(begin, std::string::npos) << "no key index in " << doc_path();
  ASSERT_NE(end, std::string::npos);
  const auto from = begin + begin_marker.size();
  const std::string generated = "\n" + key_reference_markdown();
  if (std::getenv("SLUICE_WRITE_DOCS") != nullptr) {
    doc.replace(from, end - from, generated);
    std::ofstream(doc_path()) << doc;
    return;
  }
  EXPECT_EQ(doc.substr(from, end - from), generated)
      << "docs/configuration.md's key index differs from the tables; regenerate it with "
         "SLUICE_WRITE_DOCS=1 build/release/sluice_tests --gtest_filter='KeyReference*'";
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
