// Keys added with Upgrade tunnels: [server] tunnel_drain_timeout, [upstreams.NAME]
// tunnel_idle_timeout.
#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

#include "load_helpers.hpp"

namespace sluice::config {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::Errors;
using testing::errors_of;

TEST(ConfigTunnelOptions, Defaults) {
  const auto result = testing::load_with_upstream("");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_EQ(result.config->server.tunnel_drain_timeout, minutes(10));
  ASSERT_EQ(result.config->upstreams.size(), 1u);
  EXPECT_EQ(result.config->upstreams[0].tunnel_idle_timeout, hours(1));
}

TEST(ConfigTunnelOptions, EveryKeyIsRead) {
  const auto result = testing::load(R"([server]
tunnel_drain_timeout = "1s"
[upstreams.app]
tunnel_idle_timeout = "250ms"
[[upstreams.app.servers]]
address = "127.0.0.1:9001"
[upstreams.other]
[[upstreams.other.servers]]
address = "127.0.0.1:9002"
[[route]]
path_prefix = "/"
upstream = "app"
)");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_EQ(result.config->server.tunnel_drain_timeout, seconds(1));
  ASSERT_EQ(result.config->upstreams.size(), 2u);
  EXPECT_EQ(result.config->upstreams[0].tunnel_idle_timeout, milliseconds(250));
  EXPECT_EQ(result.config->upstreams[1].tunnel_idle_timeout, hours(1));  // per upstream
}

TEST(ConfigTunnelOptions, DrainTimeoutBounds) {
  const auto load = [](std::string_view text) { return testing::load_with_upstream(text); };
  EXPECT_TRUE(load("[server]\ntunnel_drain_timeout = \"24h\"\n").ok());
  EXPECT_EQ(errors_of(load("[server]\ntunnel_drain_timeout = \"0s\"\n")),
            (Errors{"test.toml:2:24: server.tunnel_drain_timeout: must be greater than 0s"}));
  EXPECT_EQ(errors_of(load("[server]\ntunnel_drain_timeout = \"25h\"\n")),
            (Errors{"test.toml:2:24: server.tunnel_drain_timeout: must be at most 24h, got 25h"}));
  EXPECT_EQ(errors_of(load("[server]\ntunnel_drain_timeout = 600\n")),
            (Errors{"test.toml:2:24: server.tunnel_drain_timeout: expected a string like \"10m\", "
                    "got integer"}));
}

TEST(ConfigTunnelOptions, IdleTimeoutBounds) {
  const auto with = [](std::string_view value) {
    return testing::load("[upstreams.app]\ntunnel_idle_timeout = " + std::string(value) +
                         "\n[[upstreams.app.servers]]\naddress = \"127.0.0.1:9001\"\n");
  };
  EXPECT_TRUE(with("\"24h\"").ok());
  EXPECT_EQ(errors_of(with("\"0s\"")),
            (Errors{"test.toml:2:23: upstreams.app.tunnel_idle_timeout: must be greater than 0s"}));
  EXPECT_EQ(errors_of(with("\"2d\"")).size(), 1u);
  EXPECT_EQ(errors_of(with("\"soon\"")).size(), 1u);
}

TEST(ConfigTunnelOptions, TheKeysBelongToTheirSections) {
  // tunnel_idle_timeout is an upstream key, tunnel_drain_timeout a server one.
  const auto a = testing::load_with_upstream("[server]\ntunnel_idle_timeout = \"1m\"\n");
  ASSERT_EQ(errors_of(a).size(), 1u);
  EXPECT_NE(errors_of(a)[0].find("server.tunnel_idle_timeout"), std::string::npos) << errors_of(a)[0];
  const auto b = testing::load(
      "[upstreams.app]\ntunnel_drain_timeout = \"1m\"\n[[upstreams.app.servers]]\naddress = \"127.0.0.1:9001\"\n");
  ASSERT_EQ(errors_of(b).size(), 1u);
  EXPECT_NE(errors_of(b)[0].find("upstreams.app.tunnel_drain_timeout"), std::string::npos) << errors_of(b)[0];
}

}  // namespace
}  // namespace sluice::config
