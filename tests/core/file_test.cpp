#include "sluice/core/file.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>

namespace sluice {
namespace {

TEST(ReadWholeFile, ReadsEveryByteAndReplacesTheOutput) {
  const auto path = std::filesystem::temp_directory_path() / "sluice-read-whole-file-test";
  std::string written(100000, '\0');
  for (std::size_t i = 0; i < written.size(); ++i) written[i] = static_cast<char>(i * 7);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(written.data(), 1, written.size(), f), written.size());
  std::fclose(f);
  std::string text = "left over";
  EXPECT_EQ(read_whole_file(path.string(), text), 0);
  EXPECT_EQ(text, written);
  std::filesystem::remove(path);
}

TEST(ReadWholeFile, MissingFilesAndDirectoriesGiveTheirErrno) {
  std::string text;
  EXPECT_EQ(read_whole_file("/nonexistent/sluice/file", text), ENOENT);
  EXPECT_EQ(read_whole_file(std::filesystem::temp_directory_path().string(), text), EISDIR);
}

}  // namespace
}  // namespace sluice
