// [log] access_file, error_file, error_format.
#include "load_helpers.hpp"

#include <gtest/gtest.h>

namespace sluice::config {
namespace {

using namespace testing;  // load_with_upstream, errors_of

TEST(LogOptions, FilesAndFormatAreRead) {
  const auto result = load_with_upstream(R"(
[log]
access_file = "/tmp/sluice-access.log"
error_file = "/tmp/sluice-error.log"
error_format = "json"
)");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_EQ(result.config->log.access_file, "/tmp/sluice-access.log");
  EXPECT_EQ(result.config->log.error_file, "/tmp/sluice-error.log");
  EXPECT_EQ(result.config->log.error_format, ErrorLogFormat::json);
}

TEST(LogOptions, DefaultsAreTheStandardStreamsAndText) {
  const auto result = load_with_upstream("");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_EQ(result.config->log.access_file, "");
  EXPECT_EQ(result.config->log.error_file, "");
  EXPECT_EQ(result.config->log.error_format, ErrorLogFormat::text);
}

TEST(LogOptions, AFileThatCannotBeOpenedIsAnErrorAtItsKey) {
  const auto result = load_with_upstream(R"(
[log]
access_file = "/nonexistent-sluice-dir/access.log"
error_file = "/tmp"
error_format = "yaml"
)");
  EXPECT_EQ(errors_of(result),
            (Errors{"test.toml:3:15: log.access_file: directory '/nonexistent-sluice-dir' does "
                    "not exist",
                    "test.toml:4:14: log.error_file: '/tmp' is a directory",
                    "test.toml:5:16: log.error_format: unknown error log format 'yaml'; expected "
                    "one of: text, json"}));
}

}  // namespace
}  // namespace sluice::config
