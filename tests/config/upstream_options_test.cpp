// Upstream options added by the balancing, health and retry work: parsing, defaults, errors.
#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

#include "load_helpers.hpp"

namespace sluice::config {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using namespace testing;  // load, errors_of

TEST(ConfigUpstreamOptions, EveryKeyIsRead) {
  const auto r = load(R"([upstreams.app]
balance = "hash"
hash_key = "cookie:session"
hash_balance_factor = 1.25
queue_size = 5
queue_timeout = "2s"
slow_start = "10s"
when_all_down = "panic"
[upstreams.app.health]
path = "/ready"
method = "GET"
host = "app.internal"
port = 9100
interval = "5s"
timeout = "500ms"
rise = 3
fall = 4
expect_status = "200,204,300-399"
expect_body = "ok"
jitter = 0.2
initial_state = "down"
[upstreams.app.passive]
max_fails = 5
fail_timeout = "20s"
max_ejection_time = "60s"
max_ejected_percent = 30
fail_on = ["connect", "503"]
[upstreams.app.retry]
attempts = 3
on = ["refused", "503"]
idempotency_header = "X-Key"
per_try_timeout = "1s"
deadline = "3s"
backoff = "10ms"
backoff_max = "100ms"
budget = 0.5
budget_window = "5s"
budget_min_per_sec = 2.5
buffer = "1MiB"
[[upstreams.app.servers]]
address = "127.0.0.1:9001"
backup = true
max_conns = 100
drain = true
)");
  ASSERT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0].to_string());
  const auto& u = r.config->upstreams.at(0);
  EXPECT_EQ(u.balance, Balance::hash);
  EXPECT_EQ(u.hash_key.to_string(), "cookie:session");
  EXPECT_DOUBLE_EQ(u.hash_balance_factor, 1.25);
  EXPECT_EQ(u.queue_size, 5u);
  EXPECT_EQ(u.queue_timeout, seconds(2));
  EXPECT_EQ(u.slow_start, seconds(10));
  EXPECT_TRUE(u.panic_when_all_down);
  ASSERT_TRUE(u.health);
  EXPECT_EQ(u.health->path, "/ready");
  EXPECT_EQ(u.health->method, ProbeMethod::get);
  EXPECT_EQ(u.health->host, "app.internal");
  EXPECT_EQ(u.health->port, 9100);
  EXPECT_EQ(u.health->interval, seconds(5));
  EXPECT_EQ(u.health->timeout, milliseconds(500));
  EXPECT_EQ(u.health->rise, 3u);
  EXPECT_EQ(u.health->fall, 4u);
  EXPECT_EQ(u.health->expect_status.to_string(), "200,204,300-399");
  EXPECT_EQ(u.health->expect_body, "ok");
  EXPECT_DOUBLE_EQ(u.health->jitter, 0.2);
  EXPECT_EQ(u.health->initial_state, InitialState::down);
  EXPECT_EQ(u.passive.max_fails, 5u);
  EXPECT_EQ(u.passive.fail_timeout, seconds(20));
  EXPECT_EQ(u.passive.max_ejection_time, seconds(60));
  EXPECT_EQ(u.passive.max_ejected_percent, 30u);
  EXPECT_EQ(u.passive.fail_on.to_string(), "connect,503");
  EXPECT_EQ(u.retry.attempts, 3u);
  EXPECT_TRUE(u.retry.on_refused);
  EXPECT_FALSE(u.retry.on_connect);
  EXPECT_FALSE(u.retry.on_reset);
  EXPECT_FALSE(u.retry.on_timeout);
  EXPECT_EQ(u.retry.on_status, (std::vector<unsigned>{503}));
  EXPECT_EQ(u.retry.idempotency_header, "X-Key");
  EXPECT_EQ(u.retry.per_try_timeout, seconds(1));
  EXPECT_EQ(u.retry.deadline, seconds(3));
  EXPECT_EQ(u.retry.backoff, milliseconds(10));
  EXPECT_EQ(u.retry.backoff_max, milliseconds(100));
  EXPECT_DOUBLE_EQ(u.retry.budget, 0.5);
  EXPECT_EQ(u.retry.budget_window, seconds(5));
  EXPECT_DOUBLE_EQ(u.retry.budget_min_per_sec, 2.5);
  EXPECT_EQ(u.retry.buffer, MiB);
  const auto& s = u.servers.at(0);
  EXPECT_TRUE(s.backup);
  EXPECT_EQ(s.max_conns, 100u);
  EXPECT_TRUE(s.drain);
}

TEST(ConfigUpstreamOptions, DefaultsWhenAbsent) {
  const auto r = load("[upstreams.app]\n");
  ASSERT_TRUE(r.ok());
  const auto& u = r.config->upstreams.at(0);
  EXPECT_FALSE(u.health);
  // Passive checks are on with no section: 3 failures within 10 s eject.
  EXPECT_EQ(u.passive.max_fails, 3u);
  EXPECT_EQ(u.passive.fail_timeout, seconds(10));
  EXPECT_DOUBLE_EQ(u.retry.budget, 0.2);
  EXPECT_EQ(u.retry.budget_window, seconds(10));
  EXPECT_DOUBLE_EQ(u.retry.budget_min_per_sec, 10.0);
  EXPECT_FALSE(u.panic_when_all_down);
  EXPECT_EQ(u.slow_start, milliseconds(0));
  EXPECT_EQ(u.retry.attempts, 2u);
  EXPECT_EQ(u.retry.on_status, (std::vector<unsigned>{502, 503, 504}));
  EXPECT_EQ(u.retry.buffer, 64 * KiB);
  EXPECT_EQ(u.hash_key.to_string(), "client_ip");
  EXPECT_EQ(u.queue_size, 0u);
}

TEST(ConfigUpstreamOptions, EmptyHealthSectionTakesTheDefaults) {
  const auto r = load("[upstreams.app.health]\n");
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r.config->upstreams.at(0).health);
  EXPECT_EQ(r.config->upstreams.at(0).health->interval, seconds(2));
}

TEST(ConfigUpstreamOptions, BadValuesNameFileLineColumnAndKey) {
  const auto r = load(R"([upstreams.app]
hash_key = "body"
when_all_down = "retry"
[upstreams.app.health]
timeout = "3s"
expect_status = "200-"
jitter = 0.9
initial_state = "maybe"
pat = "/x"
[upstreams.app.passive]
fail_on = ["connect", "teapot"]
[upstreams.app.retry]
attempts = 0
on = ["reset", "200"]
)");
  EXPECT_EQ(errors_of(r),
            (std::vector<std::string>{
                "test.toml:2:12: upstreams.app.hash_key: unknown hash key 'body'; expected "
                "client_ip, uri, header:NAME, cookie:NAME or query:NAME",
                "test.toml:3:17: upstreams.app.when_all_down: unknown when_all_down policy "
                "'retry'; expected one of: fail, panic",
                "test.toml:5:11: upstreams.app.health.timeout: must be shorter than interval (2s), "
                "got 3s",
                "test.toml:6:17: upstreams.app.health.expect_status: bad status range '200-' "
                "(expected CODE-CODE, codes 100-599)",
                "test.toml:7:10: upstreams.app.health.jitter: must be between 0 and 0.5, got 0.9",
                "test.toml:8:17: upstreams.app.health.initial_state: unknown initial state "
                "'maybe'; expected one of: up, down",
                "test.toml:9:1: upstreams.app.health.pat: unknown key 'pat'; did you mean 'path'?",
                "test.toml:11:23: upstreams.app.passive.fail_on[1]: unknown failure 'teapot'; "
                "expected connect, refused, reset, timeout, or a status, range or class (\"503\", "
                "\"500-504\", \"5xx\")",
                "test.toml:13:12: upstreams.app.retry.attempts: must be between 1 and 10, got 0",
                "test.toml:14:16: upstreams.app.retry.on[1]: a retried status must be 400..599, "
                "got 200",
            }));
}

TEST(ConfigUpstreamOptions, BalanceFactorBelowOneIsRejected) {
  const auto r = load("[upstreams.app]\nhash_balance_factor = 0.5\n");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].to_string(),
            "test.toml:2:23: upstreams.app.hash_balance_factor: must be 0 (off) or at least 1.0");
}

TEST(ConfigUpstreamOptions, ServerOptionTypesAreChecked) {
  const auto r = load("[upstreams.app]\n[[upstreams.app.servers]]\naddress = \"127.0.0.1:1\"\nbackup = \"yes\"\n");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].to_string(),
            "test.toml:4:10: upstreams.app.servers[0].backup: expected true or false, got string");
}

}  // namespace
}  // namespace sluice::config

namespace sluice::config {
namespace {

TEST(ConfigUpstreamOptions, BudgetMinIsADeprecatedAliasWithAWarning) {
  const auto r = load_string("[upstreams.app.retry]\nbudget_min = 4\n", "test.toml");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r.config->upstreams.at(0).retry.budget_min_per_sec, 4.0);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0].to_string(),
            "test.toml:2:14: upstreams.app.retry.budget_min: deprecated: read as budget_min_per_sec "
            "= 4 (retries per second always allowed)");
  const auto both = load_string("[upstreams.app.retry]\nbudget_min = 4\nbudget_min_per_sec = 2\n", "test.toml");
  EXPECT_FALSE(both.ok());
}

TEST(ConfigUpstreamOptions, KeysWithoutEffectUnderThePolicyAreWarnedAbout) {
  const auto r = load_string("[upstreams.app]\nbalance = \"round_robin\"\nhash_key = \"uri\"\n"
                             "hash_balance_factor = 1.5\n", "test.toml");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_EQ(r.warnings[0].to_string(),
            "test.toml:3:12: upstreams.app.hash_key: has no effect: balance is \"round_robin\", "
            "not \"hash\"");
  EXPECT_EQ(r.warnings[1].key_path, "upstreams.app.hash_balance_factor");
  const auto hash = load_string("[upstreams.app]\nbalance = \"hash\"\nhash_key = \"uri\"\n", "test.toml");
  ASSERT_TRUE(hash.ok());
  EXPECT_TRUE(hash.warnings.empty());
}

}  // namespace
}  // namespace sluice::config

namespace sluice::config {
namespace {

TEST(ConfigUpstreamOptions, DecayIsReadForLeastTimeAndWarnedAboutElsewhere) {
  const auto d = load_string("[upstreams.app]\nbalance = \"least_time\"\n", "test.toml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.config->upstreams.at(0).decay, std::chrono::seconds(10));
  const auto lt = load_string("[upstreams.app]\nbalance = \"least_time\"\ndecay = \"3s\"\n", "test.toml");
  ASSERT_TRUE(lt.ok());
  EXPECT_EQ(lt.config->upstreams.at(0).balance, Balance::least_time);
  EXPECT_EQ(lt.config->upstreams.at(0).decay, std::chrono::seconds(3));
  EXPECT_TRUE(lt.warnings.empty());
  const auto p2c = load_string("[upstreams.app]\nbalance = \"p2c\"\ndecay = \"3s\"\n", "test.toml");
  ASSERT_TRUE(p2c.ok());
  ASSERT_EQ(p2c.warnings.size(), 1u);
  EXPECT_EQ(p2c.warnings[0].to_string(),
            "test.toml:3:9: upstreams.app.decay: has no effect: balance is \"p2c\", not \"least_time\"");
  EXPECT_FALSE(load_string("[upstreams.app]\ndecay = \"0s\"\n", "test.toml").ok());
}

}  // namespace
}  // namespace sluice::config

namespace sluice::config {
namespace {

TEST(ConfigUpstreamOptions, ProtocolDefaultsToHttp1AndMustFitTheServersTls) {
  const auto d = load_string("[upstreams.app]\n[[upstreams.app.servers]]\naddress = \"127.0.0.1:1\"\n", "test.toml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.config->upstreams.at(0).protocol, UpstreamProtocol::http1);
  const auto h2c = load_string("[upstreams.app]\nprotocol = \"h2c\"\n[[upstreams.app.servers]]\naddress = \"127.0.0.1:1\"\n",
                               "test.toml");
  ASSERT_TRUE(h2c.ok());
  EXPECT_EQ(h2c.config->upstreams.at(0).protocol, UpstreamProtocol::h2c);
  const auto h2 = load_string("[upstreams.app]\nprotocol = \"h2\"\ntls = true\n[[upstreams.app.servers]]\n"
                              "address = \"127.0.0.1:1\"\n", "test.toml");
  ASSERT_TRUE(h2.ok());
  EXPECT_EQ(h2.config->upstreams.at(0).protocol, UpstreamProtocol::h2);
  const auto plain = load_string("[upstreams.app]\nprotocol = \"h2\"\n[[upstreams.app.servers]]\n"
                                 "address = \"127.0.0.1:1\"\n", "test.toml");
  ASSERT_EQ(plain.errors.size(), 1u);
  EXPECT_EQ(plain.errors[0].to_string(),
            "test.toml:2:12: upstreams.app.protocol: \"h2\" is HTTP/2 over TLS, but server '127.0.0.1:1' has no TLS "
            "(set tls = true or an https:// address, or use \"h2c\")");
  const auto tls = load_string("[upstreams.app]\nprotocol = \"h2c\"\n[[upstreams.app.servers]]\n"
                               "address = \"https://127.0.0.1:1\"\n", "test.toml");
  ASSERT_EQ(tls.errors.size(), 1u);
  EXPECT_EQ(tls.errors[0].to_string(),
            "test.toml:2:12: upstreams.app.protocol: \"h2c\" is cleartext HTTP/2, but server '127.0.0.1:1' uses TLS "
            "(use \"h2\")");
  const auto bad = load_string("[upstreams.app]\nprotocol = \"http2\"\n", "test.toml");
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0].key_path, "upstreams.app.protocol");
}

TEST(ConfigUpstreamOptions, GrpcProbesTakeAServiceAndNoBody) {
  const auto good = load(R"([upstreams.app]
[upstreams.app.health]
protocol = "grpc"
service = "app.v1.Orders"
[[upstreams.app.servers]]
address = "127.0.0.1:9001"
)");
  ASSERT_TRUE(good.config) << errors_of(good).front();
  EXPECT_EQ(good.config->upstreams.at(0).health->protocol, ProbeProtocol::grpc);
  EXPECT_EQ(good.config->upstreams.at(0).health->service, "app.v1.Orders");
  const auto bad = load(R"([upstreams.app]
[upstreams.app.health]
service = "app.v1.Orders"
[upstreams.web.health]
protocol = "grpc"
expect_body = "ok"
[upstreams.api.health]
protocol = "gRPC"
)");
  EXPECT_EQ(errors_of(bad),
            (std::vector<std::string>{
                "test.toml:1:1: route: 3 upstreams (app, web, api) but no [[route]] to choose between them; add "
                "routes, or keep one upstream",
                "test.toml:3:11: upstreams.app.health.service: applies to gRPC probes only; set protocol = \"grpc\"",
                "test.toml:6:15: upstreams.web.health.expect_body: a gRPC probe is judged by its health status, not a body",
                "test.toml:8:12: upstreams.api.health.protocol: unknown probe protocol 'gRPC'; did you mean 'grpc'?",
            }));
}

}  // namespace
}  // namespace sluice::config
