#include "sluice/telemetry/log_sink.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <spdlog/logger.h>

namespace sluice {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class LogSinkTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sluice-log-sink-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::shared_ptr<LogSink> sink(const fs::path& file) {
    auto s = std::make_shared<LogSink>(file.string(), 1);
    s->set_pattern("%v");
    return s;
  }

  fs::path dir_;
};

// logrotate: rename, then reopen; the lines before are in the renamed file, those after in the
// new one, none in both.
TEST_F(LogSinkTest, ReopenAfterRenameStartsANewFile) {
  const auto file = dir_ / "access.log";
  auto s = sink(file);
  spdlog::logger log("t", s);
  log.info("one");
  fs::rename(file, dir_ / "access.log.1");
  log.info("two");  // still the open file: the renamed one
  EXPECT_EQ(s->reopen(), "");
  log.info("three");
  EXPECT_EQ(read(dir_ / "access.log.1"), "one\ntwo\n");
  EXPECT_EQ(read(file), "three\n");
}

TEST_F(LogSinkTest, AFailedReopenKeepsTheOldFile) {
  fs::create_directories(dir_ / "sub");
  const auto file = dir_ / "sub" / "error.log";
  auto s = sink(file);
  spdlog::logger log("t", s);
  fs::rename(dir_ / "sub", dir_ / "moved");
  const auto error = s->reopen();
  EXPECT_NE(error.find("cannot open " + file.string()), std::string::npos) << error;
  log.info("kept");
  EXPECT_EQ(read(dir_ / "moved" / "error.log"), "kept\n");
}

TEST_F(LogSinkTest, AdoptSwitchesFiles) {
  auto s = sink(dir_ / "a.log");
  spdlog::logger log("t", s);
  log.info("a");
  s->adopt(LogSink::open((dir_ / "b.log").string()), (dir_ / "b.log").string());
  log.info("b");
  EXPECT_EQ(s->path(), (dir_ / "b.log").string());
  EXPECT_EQ(read(dir_ / "a.log"), "a\n");
  EXPECT_EQ(read(dir_ / "b.log"), "b\n");
}

TEST_F(LogSinkTest, AppendsToAnExistingFile) {
  const auto file = dir_ / "x.log";
  std::ofstream(file) << "before\n";
  auto s = sink(file);
  spdlog::logger("t", s).info("after");
  EXPECT_EQ(read(file), "before\nafter\n");
}

TEST_F(LogSinkTest, OpenNamesThePathAndTheReason) {
  try {
    LogSink s((dir_ / "missing" / "x.log").string(), 1);
    FAIL() << "opened a file in a missing directory";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot open " + (dir_ / "missing" / "x.log").string() + ": No such file or directory");
  }
}

}  // namespace
}  // namespace sluice
