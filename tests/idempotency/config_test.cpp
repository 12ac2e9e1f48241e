// [upstreams.NAME.idempotency] as the loader reads it.
#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

namespace sluice::config {
namespace {

constexpr std::string_view base = R"([[upstreams.app.servers]]
address = "127.0.0.1:1"
[upstreams.app.idempotency]
)";

LoadResult load(std::string_view section) {
  return load_string(std::string(base) + std::string(section), "test.toml");
}

TEST(IdempotencyConfig, DefaultsAreOffWithTheDocumentedValues) {
  const auto r = load_string("[[upstreams.app.servers]]\naddress = \"127.0.0.1:1\"\n", "test.toml");
  ASSERT_TRUE(r.ok());
  const auto& c = r.config->upstreams[0].idempotency;
  EXPECT_EQ(c.mode, idempotency::Mode::off);
  EXPECT_EQ(c.replay_window, std::chrono::hours(24));
  EXPECT_EQ(c.max_stored_body, 64 * KiB);
  EXPECT_EQ(c.wait, std::chrono::seconds(30));
  EXPECT_EQ(c.store, "memory");
  EXPECT_EQ(c.memory_limit, 64 * MiB);
  EXPECT_EQ(c.on_store_error, idempotency::OnStoreError::forward);
  EXPECT_TRUE(c.stores_status(201));
  EXPECT_FALSE(c.stores_status(503));
  ASSERT_NE(r.config->find_key("upstreams.app.idempotency.mode"), nullptr);
}

TEST(IdempotencyConfig, ReadsEveryKey) {
  const auto r = load(R"(mode = "replay"
header = "X-Key"
replay_window = "1h"
max_stored_body = "16KiB"
store_statuses = ["2xx", "409"]
scope = ["client_ip"]
wait = "5s"
store = "redis://127.0.0.1:6380/1"
on_store_error = "reject"
store_timeout = "100ms"
)");
  ASSERT_TRUE(r.ok()) << r.errors[0].to_string();
  const auto& c = r.config->upstreams[0].idempotency;
  EXPECT_EQ(c.mode, idempotency::Mode::replay);
  EXPECT_EQ(c.header, "X-Key");
  EXPECT_EQ(c.max_stored_body, 16 * KiB);
  EXPECT_TRUE(c.stores_status(409));
  EXPECT_FALSE(c.stores_status(404));
  EXPECT_EQ(c.on_store_error, idempotency::OnStoreError::reject);
  EXPECT_EQ(c.store_timeout, std::chrono::milliseconds(100));
}

TEST(IdempotencyConfig, BadValuesNameFileLineColumnAndKey) {
  const auto r = load(R"(mode = "sometimes"
store = "mysql://x"
scope = ["cookie:a"]
memory_limit = "128KiB"
)");
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.errors.size(), 3u);  // mode is off: memory_limit's rule does not apply
  EXPECT_EQ(r.errors[0].to_string().rfind("test.toml:4:8: upstreams.app.idempotency.mode", 0), 0u)
      << r.errors[0].to_string();
  EXPECT_NE(r.errors[1].to_string().find("idempotency.store: expected \"memory\" or"), std::string::npos);
  EXPECT_NE(r.errors[2].to_string().find("idempotency.scope[0]"), std::string::npos);
}

TEST(IdempotencyConfig, AMemoryStoreMustHoldAFewAnswers) {
  const auto r = load("mode = \"collapse\"\nmemory_limit = \"128KiB\"\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.errors[0].to_string().find("memory_limit: must hold at least 4 answers"), std::string::npos)
      << r.errors[0].to_string();
}

}  // namespace
}  // namespace sluice::config
