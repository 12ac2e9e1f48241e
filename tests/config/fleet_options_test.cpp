// [fleet]: drains shared through Redis (docs/fleet.md).
#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

#include "load_helpers.hpp"

namespace sluice::config {
namespace {

using testing::Errors;
using testing::errors_of;
using testing::load_with_upstream;

TEST(ConfigFleetOptions, AbsentSectionIsNoFleet) {
  const auto result = load_with_upstream("");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_FALSE(result.config->fleet.enabled);
  EXPECT_EQ(result.config->find_key("fleet")->value, "off");
}

TEST(ConfigFleetOptions, TcpAddressAndDefaults) {
  const auto result = load_with_upstream("[fleet]\nredis = \"redis://127.0.0.1:6380/2\"\n");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  const auto& f = result.config->fleet;
  EXPECT_TRUE(f.enabled);
  EXPECT_EQ(f.host, "127.0.0.1");
  EXPECT_EQ(f.port, 6380);
  EXPECT_EQ(f.db, 2u);
  EXPECT_TRUE(f.unix_path.empty());
  EXPECT_EQ(f.name, "");
  EXPECT_EQ(f.lease_ttl, std::chrono::seconds(10));
  EXPECT_EQ(result.config->find_key("fleet.lease_ttl")->reload, Reload::restart);
}

TEST(ConfigFleetOptions, UnixSocketAndName) {
  const auto result = load_with_upstream(
      "[fleet]\nredis = \"unix:/run/redis/redis.sock\"\nname = \"lb-a\"\nlease_ttl = \"3s\"\n");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  const auto& f = result.config->fleet;
  EXPECT_EQ(f.unix_path, "/run/redis/redis.sock");
  EXPECT_EQ(f.name, "lb-a");
  EXPECT_EQ(f.lease_ttl, std::chrono::seconds(3));
}

TEST(ConfigFleetOptions, BadValuesNameTheirKey) {
  EXPECT_EQ(errors_of(load_with_upstream("[fleet]\nredis = \"memcached://x\"\n")),
            (Errors{"test.toml:2:9: fleet.redis: expected \"redis://HOST:PORT/DB\" or \"unix:/PATH\", "
                    "got 'memcached://x'"}));
  EXPECT_EQ(errors_of(load_with_upstream("[fleet]\nredis = \"unix:run.sock\"\n")),
            (Errors{"test.toml:2:9: fleet.redis: expected an absolute socket path after \"unix:\", "
                    "got 'unix:run.sock'"}));
  EXPECT_EQ(errors_of(load_with_upstream("[fleet]\nredis = \"redis://h:0\"\n")),
            (Errors{"test.toml:2:9: fleet.redis: bad port '0'"}));
  const auto missing = errors_of(load_with_upstream("[fleet]\nname = \"a\"\n"));
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].find("fleet.redis"), std::string::npos) << missing[0];
}

}  // namespace
}  // namespace sluice::config
