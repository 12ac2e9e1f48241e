// Keys added with the admin API: [admin] token_file, [server] shutdown_delay and watch_config,
// and the rule that a non-loopback admin listener needs a token.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

#include "load_helpers.hpp"

namespace sluice::config {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Errors;

using testing::errors_of;

// A readable token file (the loader reads it as the runtime will).
std::string token_file(std::string_view name = "admin.token", std::string_view text = "secret\n") {
  const auto path = std::filesystem::temp_directory_path() / ("sluice-test-" + std::string(name));
  std::ofstream(path) << text;
  return path.string();
}

// Every snippet here gets the one upstream a config needs, last so that line numbers hold.
LoadResult load(std::string_view text) { return testing::load_with_upstream(text); }

TEST(ConfigAdminOptions, Defaults) {
  const auto result = load("");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_EQ(result.config->server.shutdown_delay, milliseconds(0));
  EXPECT_FALSE(result.config->server.watch_config);
  EXPECT_FALSE(result.config->admin.enabled);
  EXPECT_EQ(result.config->admin.token_file, "");
}

TEST(ConfigAdminOptions, EveryKeyIsRead) {
  const auto result = load(R"([server]
shutdown_delay = "5s"
watch_config = true
[admin]
listen = "0.0.0.0:9901"
token_file = ")" + token_file() + "\"\n");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_EQ(result.config->server.shutdown_delay, seconds(5));
  EXPECT_TRUE(result.config->server.watch_config);
  EXPECT_TRUE(result.config->admin.enabled);
  EXPECT_EQ(result.config->admin.listen.to_string(), "0.0.0.0:9901");
  EXPECT_EQ(result.config->admin.token_file, token_file());
}

TEST(ConfigAdminOptions, ShutdownDelayBounds) {
  EXPECT_TRUE(load("[server]\nshutdown_delay = \"0s\"\n").ok());
  EXPECT_TRUE(load("[server]\nshutdown_delay = \"24h\"\n").ok());
  EXPECT_EQ(errors_of(load("[server]\nshutdown_delay = \"25h\"\n")),
            (Errors{"test.toml:2:18: server.shutdown_delay: must be at most 24h, got 25h"}));
  EXPECT_EQ(errors_of(load("[server]\nshutdown_delay = 5\n")),
            (Errors{"test.toml:2:18: server.shutdown_delay: expected a string like \"0s\", got "
                    "integer"}));
}

TEST(ConfigAdminOptions, WatchConfigIsABoolean) {
  EXPECT_EQ(errors_of(load("[server]\nwatch_config = \"yes\"\n")),
            (Errors{"test.toml:2:16: server.watch_config: expected true or false, got string"}));
}

TEST(ConfigAdminOptions, LoopbackAddressesNeedNoToken) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "localhost", "LocalHost", "[::1]"}) {
    const auto result = load("[admin]\nlisten = \"" + std::string(host) + ":9901\"\n");
    EXPECT_TRUE(result.ok()) << host << ": " << ::testing::PrintToString(errors_of(result));
  }
  EXPECT_TRUE(load("[admin]\n").ok());  // the default, 127.0.0.1:9901
}

TEST(ConfigAdminOptions, NonLoopbackAddressNeedsATokenFile) {
  for (const char* host : {"0.0.0.0", "10.0.0.5", "[::]", "128.0.0.1"}) {
    const std::string listen = std::string(host) + ":9901";
    EXPECT_EQ(errors_of(load("[admin]\nlisten = \"" + listen + "\"\n")),
              (Errors{"test.toml:2:10: admin.listen: admin listener on a non-loopback address "
                      "needs token_file"}))
        << host;
    EXPECT_TRUE(load("[admin]\nlisten = \"" + listen + "\"\ntoken_file = \"" + token_file() + "\"\n").ok())
        << host;
  }
}

// `check` refuses what `run` would: a token file that cannot be read, or holds no token.
TEST(ConfigAdminOptions, TokenFileMustBeReadableAndHoldAToken) {
  EXPECT_EQ(errors_of(load("[admin]\ntoken_file = \"/nonexistent/admin.token\"\n")),
            (Errors{"test.toml:2:14: admin.token_file: cannot read '/nonexistent/admin.token': No "
                    "such file or directory"}));
  const auto empty = token_file("empty.token", " \n");
  EXPECT_EQ(errors_of(load("[admin]\ntoken_file = \"" + empty + "\"\n")),
            (Errors{"test.toml:2:14: admin.token_file: the token file '" + empty + "' is empty"}));
}

TEST(ConfigAdminOptions, TokenFileMustBeANonEmptyString) {
  EXPECT_EQ(errors_of(load("[admin]\ntoken_file = 42\n")),
            (Errors{"test.toml:2:14: admin.token_file: expected a string, got integer"}));
  EXPECT_EQ(errors_of(load("[admin]\ntoken_file = \"\"\n")),
            (Errors{"test.toml:2:14: admin.token_file: must not be empty; remove the key to "
                    "leave POSTs open"}));
}

TEST(ConfigAdminOptions, TyposAreSuggested) {
  EXPECT_EQ(errors_of(load("[admin]\ntoken_fle = \"t\"\n[server]\nshutdown_dely = \"1s\"\n")),
            (Errors{"test.toml:2:1: admin.token_fle: unknown key 'token_fle'; did you mean "
                    "'token_file'?",
                    "test.toml:4:1: server.shutdown_dely: unknown key 'shutdown_dely'; did you "
                    "mean 'shutdown_delay'?"}));
}

}  // namespace
}  // namespace sluice::config

namespace sluice::config {
namespace {

TEST(ConfigAdminOptions, AllowedHostsAreLowercasedNames) {
  const auto result = testing::load_with_upstream(
      "[admin]\nallowed_hosts = [\"Sluice.Internal\", \"lb-1.example\"]\n");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(testing::errors_of(result));
  EXPECT_EQ(result.config->admin.allowed_hosts,
            (std::vector<std::string>{"sluice.internal", "lb-1.example"}));
  EXPECT_TRUE(testing::load_with_upstream("[admin]\n").config->admin.allowed_hosts.empty());
}

TEST(ConfigAdminOptions, AnAllowedHostWithAPortOrAnEmptyOneIsAnError) {
  EXPECT_EQ(testing::errors_of(testing::load_with_upstream(
                "[admin]\nallowed_hosts = [\"ok.example\", \"bad.example:80\", \"\"]\n")),
            (testing::Errors{
                "test.toml:2:32: admin.allowed_hosts[1]: 'bad.example:80' is not a host name "
                "(letters, digits, '-' and '.'; no port)",
                "test.toml:2:50: admin.allowed_hosts[2]: '' is not a host name (letters, digits, "
                "'-' and '.'; no port)"}));
  EXPECT_EQ(testing::errors_of(testing::load_with_upstream("[admin]\nallowed_hosts = \"a\"\n")).size(), 1U);
}

}  // namespace
}  // namespace sluice::config
