// The shipped examples are documentation users copy from: each must load without an error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>

#include "sluice/config/loader.hpp"

namespace sluice::config {
namespace {

namespace fs = std::filesystem;

bool is_repo_root(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "conf" / "sluice.toml", ec);
}

// The repository root: from this source file's path when the build kept it absolute (CMake
// does), else upwards from the working directory (ctest runs inside the build dir, which is
// inside the repository).
std::optional<fs::path> find_repo_root() {
  const fs::path source(__FILE__);
  if (source.is_absolute()) {
    const fs::path root = source.parent_path().parent_path().parent_path();
    if (is_repo_root(root)) return root;
  }
  std::error_code ec;
  for (fs::path dir = fs::current_path(ec); !ec && !dir.empty(); dir = dir.parent_path()) {
    if (is_repo_root(dir)) return dir;
    if (dir == dir.root_path()) break;
  }
  return std::nullopt;
}

TEST(ConfigFiles, EveryExampleInConfLoads) {
  const auto root = find_repo_root();
  ASSERT_TRUE(root.has_value()) << "no conf/sluice.toml above " << fs::current_path();
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(*root / "conf")) {
    if (entry.path().extension() != ".toml") continue;
    const auto result = load_file(entry.path().string());
    std::string errors;
    for (const auto& error : result.errors) errors += "\n  " + error.to_string();
    EXPECT_TRUE(result.ok()) << entry.path() << errors;
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

TEST(ConfigFiles, DemoConfigIsTheDocumentedOne) {
  const auto root = find_repo_root();
  ASSERT_TRUE(root.has_value());
  const auto result = load_file((*root / "conf" / "sluice.toml").string());
  ASSERT_TRUE(result.ok());
  const Config& config = *result.config;
  ASSERT_EQ(config.server.listen.size(), 1u);
  EXPECT_EQ(config.server.listen[0].to_string(), "127.0.0.1:8080");
  EXPECT_EQ(config.server.workers, 0u);
  EXPECT_EQ(config.log.access, AccessLogFormat::text);
  EXPECT_TRUE(config.admin.enabled);
  EXPECT_EQ(config.admin.listen.to_string(), "127.0.0.1:9901");
  EXPECT_TRUE(config.routes.empty());
  ASSERT_EQ(config.upstreams.size(), 1u);
  const UpstreamConfig& app = config.upstreams[0];
  EXPECT_EQ(app.name, "app");
  EXPECT_EQ(app.balance, Balance::round_robin);
  ASSERT_EQ(app.servers.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(app.servers[i].name, "app-" + std::to_string(i + 1));
    EXPECT_EQ(app.servers[i].address.to_string(), "127.0.0.1:900" + std::to_string(i + 1));
  }
  const std::string path = (*root / "conf" / "sluice.toml").string();
  EXPECT_EQ(summary(config),
            path + ": ok: 1 listener, 1 upstream (3 servers), 0 routes, admin 127.0.0.1:9901");
}


// docs/configuration.md gives every key a reload class in its table's `reload` column; the
// loader declares it where it reads the key. For every key of conf/full-example.toml (which sets
// every key), the row must exist and say the loader's class, so the docs cannot drift.
std::string doc_path_of(std::string path) {
  path = std::regex_replace(path, std::regex(R"(\[\d+\])"), "[]");
  return std::regex_replace(path, std::regex(R"(^upstreams\.[^.\[]+)"), "upstreams.NAME");
}

// Section prefix ("upstreams.NAME.retry.") + key -> the row's reload cell.
std::map<std::string, std::string> documented_reload_classes(const fs::path& file) {
  std::ifstream in(file);
  std::map<std::string, std::string> out;
  std::string line, prefix;
  int reload_column = -1;
  const std::regex heading(R"(^#+ `\[+([A-Za-z.]+)\]+`)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, heading)) {
      const bool array = line.find("[[") != std::string::npos;
      prefix = m[1].str() + (array ? "[]." : ".");
      reload_column = -1;
      continue;
    }
    if (line.rfind("|", 0) != 0) {
      reload_column = -1;
      continue;
    }
    // Cells split at `|`, except an escaped `\|` inside one.
    std::vector<std::string> cells(1);
    for (std::size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '|' && line[i - 1] != '\\') cells.emplace_back();
      else cells.back() += line[i];
    }
    cells.pop_back();  // after the closing `|`
    if (cells.size() > 1 && cells[0] == " key ") {
      reload_column = -1;
      for (std::size_t i = 0; i < cells.size(); ++i)
        if (cells[i].find("reload") != std::string::npos) reload_column = static_cast<int>(i);
      continue;
    }
    if (reload_column < 0 || static_cast<int>(cells.size()) <= reload_column) continue;
    const std::regex name("`([a-z][a-z0-9_]*)`");
    for (std::sregex_iterator it(cells[0].begin(), cells[0].end(), name), end; it != end; ++it)
      out[prefix + (*it)[1].str()] = cells[static_cast<std::size_t>(reload_column)];
  }
  return out;
}

TEST(ConfigFiles, EveryKeysReloadClassIsDocumented) {
  const auto root = find_repo_root();
  ASSERT_TRUE(root.has_value());
  const auto documented = documented_reload_classes(*root / "docs" / "configuration.md");
  const auto result = load_file((*root / "conf" / "full-example.toml").string());
  ASSERT_TRUE(result.ok());
  int checked = 0;
  for (const auto& key : result.config->keys) {
    const auto path = doc_path_of(key.path);
    // A whole section (`admin`, `upstreams.NAME.health`) is documented by its heading.
    const auto below = documented.lower_bound(path + ".");
    if (below != documented.end() && below->first.rfind(path + ".", 0) == 0) continue;
    const auto it = documented.find(path);
    if (it == documented.end()) {
      ADD_FAILURE() << path << ": no row with a reload column in docs/configuration.md";
      continue;
    }
    const char* expected = key.reload == Reload::restart ? "restart" : "live";
    EXPECT_NE(it->second.find(expected), std::string::npos)
        << path << ": docs say '" << it->second << "', the loader says " << expected;
    ++checked;
  }
  EXPECT_GE(checked, 50);
}

}  // namespace
}  // namespace sluice::config
