// ControlLoop: its admin actions are members that run on the control thread. Each test posts
// them to the loop before run(), so they run once the process serves (listeners open, workers
// started), in order, and the last one shuts down: run() then returns, with nothing to wait for
// but the loop itself (no signal, no sleep).
#include "sluice/runtime/control_loop.hpp"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <boost/asio/post.hpp>
#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

namespace sluice {
namespace {

namespace net = boost::asio;

constexpr std::string_view serving = R"([server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access_file = "/dev/null"
[[route]]
path_prefix = "/"
return = { status = 200, body = "ok" }
)";

struct ControlLoopTest : ::testing::Test {
  std::filesystem::path dir;
  std::string path;

  ControlLoopTest() {
    dir = std::filesystem::temp_directory_path() /
          ("sluice-control-loop-test-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir);
    path = (dir / "sluice.toml").string();
    write(serving);
  }
  ~ControlLoopTest() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }

  void write(std::string_view text) { std::ofstream(path, std::ios::trunc) << text; }

  std::unique_ptr<ControlLoop> loop() {
    auto loaded = config::load_file(path);
    if (!loaded.ok()) throw std::runtime_error(loaded.errors.at(0).to_string());
    return std::make_unique<ControlLoop>(std::move(*loaded.config), path);
  }
};

TEST_F(ControlLoopTest, AReloadAppliesTheFileAndTheMetricsCountIt) {
  auto control = loop();
  admin::ReloadOutcome outcome;
  std::string metrics;
  net::post(control->io(), [&] {
    write(std::string(serving) + "[reload]\nwatch = \"0s\"\n");
    outcome = control->reload(true);
    metrics = RuntimeControl(*control).metrics_text();
    control->shut_down(SIGTERM);
  });
  ASSERT_EQ(control->run(), 0);
  EXPECT_TRUE(outcome.ok);
  EXPECT_TRUE(outcome.errors.empty());
  EXPECT_EQ(outcome.version, 2u);
  EXPECT_EQ(control->snapshot()->version, 2u);
  EXPECT_EQ(control->reloads_ok(), 1u);
  EXPECT_NE(metrics.find("\nsluice_config_reloads_total{result=\"success\"} 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nsluice_connections{side=\"client\"} 0\n"), std::string::npos) << metrics;
}

TEST_F(ControlLoopTest, ARejectedReloadNamesTheFileAndKeepsTheRunningConfig) {
  auto control = loop();
  admin::ReloadOutcome outcome;
  net::post(control->io(), [&] {
    std::string broken(serving);
    broken.replace(broken.find("workers = 1"), 11, "workers = \"two\"");
    write(broken);
    outcome = control->reload(true);
    control->shut_down(SIGTERM);
  });
  ASSERT_EQ(control->run(), 0);
  EXPECT_FALSE(outcome.ok);
  ASSERT_EQ(outcome.errors.size(), 1u);
  EXPECT_EQ(outcome.errors[0].rfind(path + ":3:", 0), 0u) << outcome.errors[0];
  EXPECT_EQ(outcome.version, 1u);
  EXPECT_EQ(control->reloads_failed(), 1u);
  EXPECT_EQ(control->snapshot()->version, 1u);
}

TEST_F(ControlLoopTest, ShutDownEndsReadinessAndRefusesAnUpgrade) {
  auto control = loop();
  bool ready_before = false;
  bool ready_after = true;
  admin::UpgradeOutcome upgrade;
  net::post(control->io(), [&] {
    ready_before = control->ready();
    control->shut_down(SIGTERM);
    ready_after = control->ready();
    upgrade = control->upgrade("");
  });
  ASSERT_EQ(control->run(), 0);
  EXPECT_TRUE(ready_before);
  EXPECT_FALSE(ready_after);
  EXPECT_FALSE(upgrade.ok);
  EXPECT_EQ(upgrade.error, "this process is shutting down");
}

}  // namespace
}  // namespace sluice
