// The shipped examples are documentation users copy from: each must load without an error.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

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
  EXPECT_EQ(app.balance, "round_robin");
  ASSERT_EQ(app.servers.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(app.servers[i].name, "app-" + std::to_string(i + 1));
    EXPECT_EQ(app.servers[i].address.to_string(), "127.0.0.1:900" + std::to_string(i + 1));
  }
  const std::string path = (*root / "conf" / "sluice.toml").string();
  EXPECT_EQ(summary(config),
            path + ": ok: 1 listener, 1 upstream (3 servers), 0 routes, admin 127.0.0.1:9901");
}

}  // namespace
}  // namespace sluice::config
