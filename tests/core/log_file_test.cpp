#include "sluice/core/log_file.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace sluice {
namespace {

namespace fs = std::filesystem;

TEST(LogFileProblem, SaysWhyAPathCannotBeALogFile) {
  const auto dir = fs::temp_directory_path() / ("sluice-log-file-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_EQ(log_file_problem((dir / "new.log").string()), "");  // absent: would be created
  EXPECT_FALSE(fs::exists(dir / "new.log"));                   // ... but not by the check
  std::ofstream(dir / "old.log") << "x";
  EXPECT_EQ(log_file_problem((dir / "old.log").string()), "");
  EXPECT_EQ(log_file_problem((dir / "no" / "x.log").string()),
            "directory '" + (dir / "no").string() + "' does not exist");
  EXPECT_EQ(log_file_problem(dir.string()), "'" + dir.string() + "' is a directory");
  EXPECT_NE(log_file_problem(""), "");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sluice
