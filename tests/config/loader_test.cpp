#include "sluice/config/loader.hpp"

#include "load_helpers.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace sluice::config {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using namespace testing;  // load, load_with_upstream, errors_of

TEST(ConfigLoader, FullFileFillsEveryField) {
  const auto result = load(R"(
[server]
listen = ["0.0.0.0:80", "[::1]:8080"]
workers = 4
header_timeout = "5s"
idle_timeout = "2m"
shutdown_timeout = "1.5s"
max_header_bytes = "32KiB"
max_uri_bytes = 4096
max_body_bytes = "0"
max_connections = 500

[log]
level = "debug"
access = "json"

[admin]
listen = "127.0.0.1:0"

[[route]]
host = "API.Example.com"
path_prefix = "/api"
upstream = "api"

[[route]]
host = "*.example.com"
upstream = "web"

[upstreams.web]
balance = "round_robin"
connect_timeout = "250ms"
response_timeout = "1h"
keepalive = 0
keepalive_timeout = "90s"

[[upstreams.web.servers]]
address = "localhost:80"
name = "web-1"
weight = 1000

[[upstreams.web.servers]]
address = "[2001:db8::1]:80"

[upstreams.api]
servers = []
)");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  const Config& c = *result.config;
  EXPECT_EQ(c.source, "test.toml");

  ASSERT_EQ(c.server.listen.size(), 2u);
  EXPECT_EQ(c.server.listen[0].host, "0.0.0.0");
  EXPECT_EQ(c.server.listen[0].port, 80);
  EXPECT_EQ(c.server.listen[1].host, "::1");
  EXPECT_EQ(c.server.listen[1].port, 8080);
  EXPECT_EQ(c.server.workers, 4u);
  EXPECT_EQ(c.server.header_timeout, seconds(5));
  EXPECT_EQ(c.server.idle_timeout, seconds(120));
  EXPECT_EQ(c.server.shutdown_timeout, milliseconds(1500));
  EXPECT_EQ(c.server.max_header_bytes, 32 * KiB);
  EXPECT_EQ(c.server.max_uri_bytes, 4096u);
  EXPECT_EQ(c.server.max_body_bytes, 0u);
  EXPECT_EQ(c.server.max_connections, 500u);

  EXPECT_EQ(c.log.level, LogLevel::debug);
  EXPECT_EQ(c.log.access, AccessLogFormat::json);

  EXPECT_TRUE(c.admin.enabled);
  EXPECT_EQ(c.admin.listen.to_string(), "127.0.0.1:0");

  ASSERT_EQ(c.routes.size(), 2u);
  EXPECT_EQ(c.routes[0].host, "api.example.com");  // hosts compare case-insensitively
  EXPECT_EQ(c.routes[0].path_prefix, "/api");
  EXPECT_EQ(c.routes[0].upstream, "api");
  EXPECT_EQ(c.routes[0].where.line, 20);
  EXPECT_EQ(c.routes[0].where.column, 1);
  EXPECT_EQ(c.routes[1].host, "*.example.com");
  EXPECT_EQ(c.routes[1].path_prefix, "/");
  EXPECT_EQ(c.routes[1].upstream, "web");

  // File order, not the alphabetical order toml++ keeps tables in.
  ASSERT_EQ(c.upstreams.size(), 2u);
  const UpstreamConfig& web = c.upstreams[0];
  EXPECT_EQ(web.name, "web");
  EXPECT_EQ(web.where.line, 29);
  EXPECT_EQ(web.balance, Balance::round_robin);
  EXPECT_EQ(web.connect_timeout, milliseconds(250));
  EXPECT_EQ(web.response_timeout, std::chrono::hours(1));
  EXPECT_EQ(web.keepalive, 0u);
  EXPECT_EQ(web.keepalive_timeout, seconds(90));
  ASSERT_EQ(web.servers.size(), 2u);
  EXPECT_EQ(web.servers[0].address.to_string(), "localhost:80");
  EXPECT_EQ(web.servers[0].name, "web-1");
  EXPECT_EQ(web.servers[0].identity(), "web-1");
  EXPECT_EQ(web.servers[0].weight, 1000u);
  EXPECT_EQ(web.servers[0].where.line, 36);
  EXPECT_EQ(web.servers[1].address.host, "2001:db8::1");
  EXPECT_EQ(web.servers[1].name, "");
  EXPECT_EQ(web.servers[1].identity(), "[2001:db8::1]:80");
  EXPECT_EQ(web.servers[1].weight, 1u);

  EXPECT_EQ(c.upstreams[1].name, "api");
  EXPECT_TRUE(c.upstreams[1].servers.empty());  // allowed: the proxy answers 503
  EXPECT_EQ(c.find_upstream("api"), &c.upstreams[1]);
  EXPECT_EQ(c.find_upstream("nope"), nullptr);
}

TEST(ConfigLoader, AbsentKeysKeepTheDefaults) {
  const auto result = load(one_upstream);
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  const Config& c = *result.config;
  const ServerSection server;
  ASSERT_EQ(c.server.listen.size(), 1u);
  EXPECT_EQ(c.server.listen[0].to_string(), "127.0.0.1:8080");
  EXPECT_EQ(c.server.workers, 0u);
  EXPECT_EQ(c.server.header_timeout, seconds(10));
  EXPECT_EQ(c.server.idle_timeout, seconds(60));
  EXPECT_EQ(c.server.shutdown_timeout, seconds(30));
  EXPECT_EQ(c.server.max_header_bytes, 16 * KiB);
  EXPECT_EQ(c.server.max_uri_bytes, 8 * KiB);
  EXPECT_EQ(c.server.max_body_bytes, 100 * MiB);
  EXPECT_EQ(c.server.max_connections, 10000u);
  EXPECT_TRUE(c.server.defer_accept);  // the kernel holds a connection until it speaks
  EXPECT_EQ(c.log.level, LogLevel::info);
  EXPECT_EQ(c.log.access, AccessLogFormat::text);
  EXPECT_FALSE(c.admin.enabled);
  EXPECT_TRUE(c.routes.empty());
  ASSERT_EQ(c.upstreams.size(), 1u);
  const UpstreamConfig& app = c.upstreams[0];
  EXPECT_EQ(app.name, "app");
  EXPECT_EQ(app.balance, Balance::round_robin);
  EXPECT_EQ(app.connect_timeout, seconds(1));
  EXPECT_EQ(app.response_timeout, seconds(30));
  EXPECT_EQ(app.keepalive, 32u);
  EXPECT_EQ(app.keepalive_timeout, seconds(30));
  ASSERT_EQ(app.servers.size(), 1u);
  EXPECT_EQ(app.servers[0].identity(), "127.0.0.1:9001");
  EXPECT_EQ(app.servers[0].weight, 1u);
}

TEST(ConfigLoader, EmptyAdminSectionEnablesTheDefaultAdminListener) {
  const auto result = load_with_upstream("[admin]\n");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_TRUE(result.config->admin.enabled);
  EXPECT_EQ(result.config->admin.listen.to_string(), "127.0.0.1:9901");
}

TEST(ConfigLoader, ListenAcceptsAPlainString) {
  const auto result = load_with_upstream("[server]\nlisten = \"[::]:8443\"\n");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  ASSERT_EQ(result.config->server.listen.size(), 1u);
  EXPECT_EQ(result.config->server.listen[0].to_string(), "[::]:8443");
}

TEST(ConfigLoader, UriLimitFollowsASmallerHeaderLimitWhenNotSet) {
  const auto result = load_with_upstream("[server]\nmax_header_bytes = \"4KiB\"\n");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_EQ(result.config->server.max_uri_bytes, 4 * KiB);
}

TEST(ConfigLoader, SyntaxErrorIsOneErrorAtItsPosition) {
  const auto result = load("[server]\nworkers = = 2\nlistn = 1\n");
  EXPECT_FALSE(result.ok());
  ASSERT_EQ(result.errors.size(), 1u);
  const ConfigError& e = result.errors[0];
  EXPECT_EQ(e.file, "test.toml");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 11);
  EXPECT_EQ(e.key_path, "");
  EXPECT_EQ(e.message, "Error while parsing value: could not determine value type");
  EXPECT_EQ(e.to_string(), "test.toml:2:11: " + e.message);
}

TEST(ConfigLoader, ErrorFieldsAreSetOneByOne) {
  const auto result = load_with_upstream("[server]\nworkers = 2000\n");
  ASSERT_EQ(result.errors.size(), 1u);
  const ConfigError& e = result.errors[0];
  EXPECT_EQ(e.file, "test.toml");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 11);
  EXPECT_EQ(e.key_path, "server.workers");
  EXPECT_EQ(e.message, "must be between 0 and 1024, got 2000");
  EXPECT_EQ(e.to_string(), "test.toml:2:11: server.workers: must be between 0 and 1024, got 2000");
  EXPECT_FALSE(result.config.has_value());
}

TEST(ConfigLoader, UnknownKeysAtEveryLevelSuggestTheClosestValidKey) {
  const auto result = load(R"(sever = 1
[server]
listn = "127.0.0.1:8080"
[log]
levle = "info"
[admin]
Listen = "127.0.0.1:9901"
[[route]]
upstream = "app"
path = "/api"
[upstreams.app]
balanse = "round_robin"
[[upstreams.app.servers]]
address = "127.0.0.1:9001"
wieght = 2
)");
  EXPECT_EQ(
      errors_of(result),
      (Errors{"test.toml:1:1: sever: unknown key 'sever'; did you mean 'server'?",
              "test.toml:3:1: server.listn: unknown key 'listn'; did you mean 'listen'?",
              "test.toml:5:1: log.levle: unknown key 'levle'; did you mean 'level'?",
              "test.toml:7:1: admin.Listen: unknown key 'Listen'; did you mean 'listen'?",
              "test.toml:10:1: route[0].path: unknown key 'path'; did you mean 'path_prefix'?",
              "test.toml:12:1: upstreams.app.balanse: unknown key 'balanse'; did you mean "
              "'balance'?",
              "test.toml:15:1: upstreams.app.servers[0].wieght: unknown key 'wieght'; did "
              "you mean 'weight'?"}));
}

TEST(ConfigLoader, UnknownKeyWithoutACloseMatchListsTheValidOnes) {
  const auto result = load_with_upstream("[log]\ncolour = true\n[upstream.x]\n");
  EXPECT_EQ(errors_of(result),
            (Errors{"test.toml:2:1: log.colour: unknown key 'colour'; expected one of: "
                    "level, access, access_file, error_file, error_format",
                    "test.toml:3:2: upstream: unknown key 'upstream'; did you mean "
                    "'upstreams'?"}));
}

TEST(ConfigLoader, WrongTypesNameWhatWasExpected) {
  const auto result = load(R"([server]
listen = 8080
workers = "4"
header_timeout = 10
max_body_bytes = true
[log]
level = 3
[upstreams.app]
keepalive_timeout = 30
servers = "127.0.0.1:9001"
)");
  EXPECT_EQ(
      errors_of(result),
      (Errors{
          "test.toml:2:10: server.listen: expected a \"host:port\" string or an array of them, "
          "got integer",
          "test.toml:3:11: server.workers: expected an integer, got string",
          "test.toml:4:18: server.header_timeout: expected a string like \"10s\", got integer",
          "test.toml:5:18: server.max_body_bytes: expected a size like \"100MiB\" or an integer "
          "number of bytes, got boolean",
          "test.toml:7:9: log.level: expected a string, got integer",
          "test.toml:9:21: upstreams.app.keepalive_timeout: expected a string like \"30s\", got "
          "integer",
          "test.toml:10:11: upstreams.app.servers: expected an array of tables "
          "([[upstreams.app.servers]]), got string"}));
}

TEST(ConfigLoader, WrongTypesForSectionsAndListElements) {
  const auto result = load(R"(log = "info"
[server]
listen = ["127.0.0.1:8080", 8081]
[route]
upstream = "app"
[upstreams]
app = 1
)");
  EXPECT_EQ(errors_of(result),
            (Errors{"test.toml:1:7: log: expected a table, got string",
                    "test.toml:3:29: server.listen[1]: expected a string like "
                    "\"127.0.0.1:8080\", got integer",
                    "test.toml:4:1: route: expected an array of tables ([[route]]), got "
                    "table",
                    "test.toml:7:7: upstreams.app: expected a table, got integer"}));
}

TEST(ConfigLoader, DeferAcceptCanBeTurnedOff) {
  const auto result = load_with_upstream("[server]\ndefer_accept = false\n");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_FALSE(result.config->server.defer_accept);
  EXPECT_EQ(errors_of(load_with_upstream("[server]\ndefer_accept = 1\n")),
            (Errors{"test.toml:2:16: server.defer_accept: expected true or false, got integer"}));
}

TEST(ConfigLoader, OutOfRangeValuesStateTheBounds) {
  const auto result = load(R"([server]
workers = -1
max_connections = 0
max_header_bytes = 512
max_uri_bytes = "32KiB"
max_body_bytes = -5
header_timeout = "0s"
idle_timeout = "25h"
[upstreams.app]
keepalive = 100001
connect_timeout = "0ms"
[[upstreams.app.servers]]
address = "127.0.0.1:9001"
weight = 0
[[upstreams.app.servers]]
address = "127.0.0.1:9002"
weight = 1001
)");
  EXPECT_EQ(
      errors_of(result),
      (Errors{"test.toml:2:11: server.workers: must be between 0 and 1024, got -1",
              "test.toml:3:19: server.max_connections: must be between 1 and 1000000, got 0",
              "test.toml:4:20: server.max_header_bytes: must be between 1KiB and 1MiB, got 512B",
              // Checked against the default header limit, because the given one was rejected.
              "test.toml:5:17: server.max_uri_bytes: must not exceed server.max_header_bytes "
              "(16KiB), got 32KiB",
              "test.toml:6:18: server.max_body_bytes: must not be negative, got -5",
              "test.toml:7:18: server.header_timeout: must be greater than 0s",
              "test.toml:8:16: server.idle_timeout: must be at most 24h, got 25h",
              "test.toml:10:13: upstreams.app.keepalive: must be between 0 and 100000, got 100001",
              "test.toml:11:19: upstreams.app.connect_timeout: must be greater than 0s",
              "test.toml:14:10: upstreams.app.servers[0].weight: must be between 1 and 1000, got "
              "0; to take a server out of rotation, drain it instead of setting weight 0",
              "test.toml:17:10: upstreams.app.servers[1].weight: must be between 1 and 1000, got "
              "1001"}));
}

TEST(ConfigLoader, ZeroIsAcceptedWhereItMeansSomething) {
  const auto result = load_with_upstream(R"([server]
listen = ["127.0.0.1:0", "[::1]:0"]
shutdown_timeout = "0s"
max_body_bytes = 0
workers = 0
[admin]
listen = "127.0.0.1:0"
)");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_EQ(result.config->server.shutdown_timeout, Duration::zero());
  EXPECT_EQ(result.config->server.max_body_bytes, 0u);
  EXPECT_EQ(result.config->admin.listen.port, 0);
  // Ephemeral ports cannot collide, with each other or with the admin listener.
  EXPECT_EQ(result.config->server.listen[0].port, 0);
  EXPECT_EQ(result.config->server.listen[1].port, 0);
}

TEST(ConfigLoader, MalformedValuesCarryTheParsersReason) {
  const auto result = load(R"([server]
listen = ["127.0.0.1", "127.0.0.1:65536", "::1:80"]
header_timeout = "10"
idle_timeout = "-1s"
max_header_bytes = "16KB"
[admin]
listen = "localhost:70000"
[upstreams.app]
[[upstreams.app.servers]]
address = "app-1"
)");
  EXPECT_EQ(
      errors_of(result),
      (Errors{
          "test.toml:2:11: server.listen[0]: missing port in '127.0.0.1' (expected host:port)",
          "test.toml:2:24: server.listen[1]: port 65536 out of range (0..65535)",
          "test.toml:2:43: server.listen[2]: an IPv6 address needs brackets: '[::1]:80'",
          "test.toml:3:18: server.header_timeout: missing unit in '10'; add one of ms, s, m, h "
          "(e.g. \"10s\")",
          "test.toml:4:16: server.idle_timeout: negative duration '-1s'",
          "test.toml:5:20: server.max_header_bytes: unknown unit 'KB'; did you mean 'KiB'? (use "
          "B, KiB, MiB, GiB)",
          "test.toml:7:10: admin.listen: port 70000 out of range (0..65535)",
          "test.toml:10:11: upstreams.app.servers[0].address: missing port in 'app-1' (expected "
          "host:port)"}));
}

TEST(ConfigLoader, UnknownChoicesSuggestOrListTheValidOnes) {
  const auto result = load(R"([log]
level = "warning"
access = "yaml"
[upstreams.a]
balance = "round_robbin"
[upstreams.b]
balance = "random"
[[route]]
upstream = "a"
)");
  EXPECT_EQ(errors_of(result),
            (Errors{"test.toml:2:9: log.level: unknown log level 'warning'; did you mean 'warn'?",
                    "test.toml:3:10: log.access: unknown access log format 'yaml'; expected one "
                    "of: text, json, off",
                    "test.toml:5:11: upstreams.a.balance: unknown balance policy 'round_robbin'; "
                    "did you mean 'round_robin'?",
                    "test.toml:7:11: upstreams.b.balance: unknown balance policy 'random'; "
                    "expected one of: round_robin, weighted, least_conn, hash, p2c, least_time"}));
}

TEST(ConfigLoader, DuplicateServerIdentitiesInOneUpstream) {
  const auto result = load(R"([upstreams.app]
servers = [
  { address = "127.0.0.1:9001", name = "app-1" },
  { address = "127.0.0.1:9002", name = "app-1" },
  { address = "127.0.0.1:9003" },
  { address = "127.0.0.1:9003" },
  { address = "127.0.0.1:9003", name = "app-3b" },
]
[upstreams.other]
servers = [{ address = "127.0.0.1:9001", name = "app-1" }]
[[route]]
upstream = "app"
)");
  // Same address under another name is a distinct server (e.g. two weights for one origin),
  // and identities only need to be unique within their upstream.
  EXPECT_EQ(errors_of(result),
            (Errors{"test.toml:4:40: upstreams.app.servers[1].name: duplicate server "
                    "'app-1' (also servers[0]); each server needs a unique name or address",
                    "test.toml:6:15: upstreams.app.servers[3].address: duplicate server "
                    "'127.0.0.1:9003' (also servers[2]); each server needs a unique name "
                    "or address"}));
}

TEST(ConfigLoader, DuplicateListenAddressesIncludingTheAdminOne) {
  const auto result = load_with_upstream(R"([server]
listen = ["127.0.0.1:8080", "0.0.0.0:8080", "LOCALHOST:80", "localhost:80"]
[admin]
listen = "127.0.0.1:8080"
)");
  EXPECT_EQ(errors_of(result),
            (Errors{"test.toml:2:61: server.listen[3]: duplicate listen address "
                    "localhost:80 (also server.listen[2])",
                    "test.toml:4:10: admin.listen: duplicate listen address 127.0.0.1:8080 "
                    "(also server.listen[0])"}));
}

TEST(ConfigLoader, AdminDefaultCollidesWithTheDefaultListenerOnlyIfEqual) {
  const auto result = load_with_upstream("[server]\nlisten = \"127.0.0.1:9901\"\n[admin]\n");
  EXPECT_EQ(errors_of(result),
            (Errors{"test.toml:3:1: admin.listen: duplicate listen address 127.0.0.1:9901 "
                    "(also server.listen)"}));
}

TEST(ConfigLoader, NoUpstreamAtAllPointsAtTheTop) {
  EXPECT_EQ(errors_of(load("")), (Errors{"test.toml:1:1: upstreams: no upstream defined; add an "
                                         "[upstreams.NAME] section with its servers"}));
  EXPECT_EQ(errors_of(load("[server]\nworkers = 1\n[upstreams]\n")),
            (Errors{"test.toml:3:1: upstreams: no upstream defined; add an "
                    "[upstreams.NAME] section with its servers"}));
}

TEST(ConfigLoader, SeveralUpstreamsNeedRoutes) {
  const auto result = load(R"(
[upstreams.web]
[upstreams.api]
)");
  EXPECT_EQ(errors_of(result),
            (Errors{"test.toml:2:1: route: 2 upstreams (web, api) but no [[route]] to "
                    "choose between them; add routes, or keep one upstream"}));
}

TEST(ConfigLoader, RoutesMustNameAnExistingUpstream) {
  const auto result = load(R"([[route]]
path_prefix = "/api"
upstream = "ap"
[[route]]
path_prefix = "/static"
upstream = "cdn"
[[route]]
path_prefix = "/"
[upstreams.app]
[upstreams.web]
)");
  EXPECT_EQ(errors_of(result),
            (Errors{"test.toml:3:12: route[0].upstream: unknown upstream 'ap'; did you mean 'app'?",
                    "test.toml:6:12: route[1].upstream: unknown upstream 'cdn'; expected one of: "
                    "app, web",
                    // A missing required key is reported at the table that lacks it.
                    "test.toml:7:1: route[2].upstream: required key is missing (the upstream this "
                    "route sends to)"}));
}

TEST(ConfigLoader, RouteHostAndPathPrefixAreChecked) {
  const auto result = load_with_upstream(R"([[route]]
host = "api.*.com"
path_prefix = "api"
upstream = "app"
[[route]]
host = ""
path_prefix = "/a b"
upstream = "app"
[[route]]
host = "Example.COM"
path_prefix = "/x"
upstream = "app"
[[route]]
host = "example.com"
path_prefix = "/x"
upstream = "app"
)");
  EXPECT_EQ(errors_of(result),
            (Errors{"test.toml:2:8: route[0].host: invalid host pattern 'api.*.com'; expected a "
                    "name like \"api.example.com\" or \"*.example.com\"",
                    "test.toml:3:15: route[0].path_prefix: must start with '/', got 'api'",
                    "test.toml:6:8: route[1].host: invalid host pattern ''; expected a name like "
                    "\"api.example.com\" or \"*.example.com\"",
                    "test.toml:7:15: route[1].path_prefix: must not contain '?', '#' or whitespace",
                    "test.toml:13:1: route[3]: duplicate route: same host and path_prefix as "
                    "route[2]"}));
}

TEST(ConfigLoader, ServerNeedsAnAddressAndAUsableName) {
  const auto result = load(R"([upstreams.app]
[[upstreams.app.servers]]
name = "app-1"
[[upstreams.app.servers]]
address = "127.0.0.1:9002"
name = "app 2"
[upstreams."my app"]
[[route]]
upstream = "app"
)");
  EXPECT_EQ(errors_of(result),
            (Errors{"test.toml:2:1: upstreams.app.servers[0].address: required key is missing "
                    "(the server's host:port)",
                    "test.toml:6:8: upstreams.app.servers[1].name: server name 'app 2' may use "
                    "only letters, digits, '-', '_', '.' and ':'",
                    "test.toml:7:12: upstreams.my app: upstream name 'my app' may use only "
                    "letters, digits, '-' and '_'"}));
}

TEST(ConfigLoader, EveryErrorInAFileIsReportedInFileOrder) {
  const auto result = load(R"([server]
listen = ["127.0.0.1:80800"]
workrs = 4
idle_timeout = "60"

[log]
level = "loud"

[[route]]
path_prefix = "/api"
upstream = "missing"

[upstreams.app]
balance = "fastest"

[[upstreams.app.servers]]
address = "127.0.0.1:9001"
weight = 0
)");
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(
      errors_of(result),
      (Errors{
          "test.toml:2:11: server.listen[0]: port 80800 out of range (0..65535)",
          "test.toml:3:1: server.workrs: unknown key 'workrs'; did you mean 'workers'?",
          "test.toml:4:16: server.idle_timeout: missing unit in '60'; add one of ms, s, m, h "
          "(e.g. \"60s\")",
          "test.toml:7:9: log.level: unknown log level 'loud'; expected one of: trace, debug, "
          "info, warn, error",
          "test.toml:11:12: route[0].upstream: unknown upstream 'missing'; expected one of: app",
          "test.toml:14:11: upstreams.app.balance: unknown balance policy 'fastest'; expected "
          "one of: round_robin, weighted, least_conn, hash, p2c, least_time",
          "test.toml:18:10: upstreams.app.servers[0].weight: must be between 1 and 1000, got 0; "
          "to take a server out of rotation, drain it instead of setting weight 0"}));
}

TEST(ConfigLoader, ErrorWithoutAKeyPathOmitsIt) {
  const ConfigError error{"a.toml", 3, 7, "", "bad"};
  EXPECT_EQ(error.to_string(), "a.toml:3:7: bad");
  const ConfigError keyed{"a.toml", 3, 7, "server.workers", "bad"};
  EXPECT_EQ(keyed.to_string(), "a.toml:3:7: server.workers: bad");
}

class ConfigLoadFile : public ::testing::Test {
protected:
  void SetUp() override {
    // The pid keeps concurrent runs of the suite (several build dirs) out of each other's way.
    dir_ = std::filesystem::temp_directory_path() /
           ("sluice-config-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, std::string_view text) {
    const auto path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(ConfigLoadFile, ReadsTheFileAndNamesItInErrors) {
  const auto good = write("good.toml", one_upstream);
  const auto result = load_file(good);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.config->source, good);

  const auto bad = write("bad.toml", "[server]\nworkers = 2000\n" + std::string(one_upstream));
  const auto failed = load_file(bad);
  ASSERT_EQ(failed.errors.size(), 1u);
  EXPECT_EQ(failed.errors[0].to_string(),
            bad + ":2:11: server.workers: must be between 0 and 1024, got 2000");
}

TEST_F(ConfigLoadFile, UnreadableFileIsOneErrorWithTheOsReason) {
  const auto missing = (dir_ / "missing.toml").string();
  const auto result = load_file(missing);
  EXPECT_FALSE(result.ok());
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].file, missing);
  EXPECT_EQ(result.errors[0].line, 0);
  EXPECT_EQ(result.errors[0].column, 0);
  EXPECT_EQ(result.errors[0].key_path, "");
  EXPECT_EQ(result.errors[0].message, "cannot read: No such file or directory");
  EXPECT_EQ(result.errors[0].to_string(), missing + ": cannot read: No such file or directory");

  const auto directory = load_file(dir_.string());
  ASSERT_EQ(directory.errors.size(), 1u);
  EXPECT_EQ(directory.errors[0].message, "cannot read: Is a directory");
}

TEST(ConfigSummary, CountsWhatWasLoaded) {
  auto result = load_string(R"([admin]
listen = "127.0.0.1:9901"
[upstreams.app]
[[upstreams.app.servers]]
address = "127.0.0.1:9001"
[[upstreams.app.servers]]
address = "127.0.0.1:9002"
)",
                            "conf/sluice.toml");
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(summary(*result.config),
            "conf/sluice.toml: ok: 1 listener, 1 upstream (2 servers), 0 routes, admin "
            "127.0.0.1:9901");

  result = load_string(R"([server]
listen = ["127.0.0.1:80", "127.0.0.1:81"]
[[route]]
upstream = "a"
[upstreams.a]
servers = [{ address = "127.0.0.1:9001" }]
[upstreams.b]
)",
                       "two.toml");
  ASSERT_TRUE(result.ok()) << ::testing::PrintToString(errors_of(result));
  EXPECT_EQ(summary(*result.config),
            "two.toml: ok: 2 listeners, 2 upstreams (1 server), 1 route, no admin");
}

}  // namespace
}  // namespace sluice::config
