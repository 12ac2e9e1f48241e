// [upstreams.NAME] send_timeout (full-duplex uploads, issue 14): default, per upstream, bounds.
#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

#include "load_helpers.hpp"

namespace sluice::config {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Errors;
using testing::errors_of;

LoadResult with(std::string_view value) {
  return testing::load("[upstreams.app]\nsend_timeout = " + std::string(value) +
                       "\n[[upstreams.app.servers]]\naddress = \"127.0.0.1:9001\"\n");
}

TEST(ConfigSendTimeout, DefaultsTo30Seconds) {
  const auto result = testing::load_with_upstream("");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_EQ(result.config->upstreams[0].send_timeout, seconds(30));
}

TEST(ConfigSendTimeout, IsReadPerUpstream) {
  const auto result = with("\"250ms\"");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_EQ(result.config->upstreams[0].send_timeout, milliseconds(250));
}

TEST(ConfigSendTimeout, BadValuesNameTheKeyAndPlace) {
  EXPECT_TRUE(with("\"24h\"").ok());
  EXPECT_EQ(errors_of(with("\"0s\"")),
            (Errors{"test.toml:2:16: upstreams.app.send_timeout: must be greater than 0s"}));
  EXPECT_EQ(errors_of(with("30")),
            (Errors{"test.toml:2:16: upstreams.app.send_timeout: expected a string like \"30s\", "
                    "got integer"}));
}

}  // namespace
}  // namespace sluice::config
