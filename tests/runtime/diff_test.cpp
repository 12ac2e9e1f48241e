#include "sluice/runtime/diff.hpp"

#include <algorithm>

#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

namespace sluice {
namespace {

config::Config load(std::string_view text) {
  auto r = config::load_string(text, "t.toml");
  EXPECT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0].to_string());
  return *r.config;
}

std::string servers(std::initializer_list<std::pair<const char*, int>> list, const char* extra = "") {
  std::string s = std::string("[upstreams.app]\n") + extra + "\n";
  int port = 9001;
  for (const auto& [name, weight] : list)
    s += "[[upstreams.app.servers]]\naddress = \"127.0.0.1:" + std::to_string(port++) +
         "\"\nname = \"" + name + "\"\nweight = " + std::to_string(weight) + "\n";
  return s;
}

TEST(ConfigDiff, NothingChanged) {
  const auto c = load(servers({{"a", 1}, {"b", 1}}));
  EXPECT_TRUE(config_diff(c, c).empty());
}

TEST(ConfigDiff, ReweightAddAndRemove) {
  const auto old = load(servers({{"a", 1}, {"b", 1}, {"c", 1}}));
  const auto next = load(servers({{"a", 3}, {"c", 1}, {"d", 1}}));
  EXPECT_EQ(config_diff(old, next), (std::vector<std::string>{
                                        "upstream app: - server b",
                                        "upstream app: ~ server a weight 1 -> 3",
                                        "upstream app: ~ server c address 127.0.0.1:9003 -> 127.0.0.1:9002",
                                        "upstream app: + server d (127.0.0.1:9003, weight 1)",
                                    }));
}

// Every key whose effective value changes is listed, old -> new; a section added shows as the
// switch that turns it on and its keys at their values.
TEST(ConfigDiff, EveryChangedKeyIsListedKeyByKey) {
  const auto old = load("[server]\nlisten = \"127.0.0.1:8080\"\nworkers = 2\n" +
                        servers({{"a", 1}}, "response_timeout = \"30s\""));
  const auto next = load(
      "[server]\nlisten = [\"127.0.0.1:8080\", \"127.0.0.1:8081\"]\nworkers = 1\n"
      "[log]\nlevel = \"debug\"\n[admin]\n" +
      servers({{"a", 1}}, "response_timeout = \"5s\"\n[upstreams.app.retry]\nattempts = 3\n"
                          "[upstreams.app.health]\ninterval = \"3s\"\n[upstreams.app.passive]"));
  const auto lines = config_diff(old, next);
  const auto has = [&](const std::string& line) {
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  };
  EXPECT_TRUE(has("~ server.listen: [\"127.0.0.1:8080\"] -> [\"127.0.0.1:8080\", \"127.0.0.1:8081\"]"));
  EXPECT_TRUE(has("~ server.workers: 2 -> 1 (needs a restart)"));
  EXPECT_TRUE(has("~ log.level: \"info\" -> \"debug\""));
  EXPECT_TRUE(has("~ admin: off -> on"));
  EXPECT_TRUE(has("+ admin.listen = \"127.0.0.1:9901\""));
  EXPECT_TRUE(has("~ upstreams.app.response_timeout: 30s -> 5s"));
  EXPECT_TRUE(has("~ upstreams.app.retry.attempts: 2 -> 3"));
  EXPECT_TRUE(has("~ upstreams.app.health: off -> on"));
  EXPECT_TRUE(has("+ upstreams.app.health.interval = 3s"));
  for (const auto& line : lines) EXPECT_EQ(line.find("servers["), std::string::npos) << line;
}

// A key written at its default is no change; removing it again is none either.
TEST(ConfigDiff, TheDefaultWrittenOutIsNoChange) {
  const auto old = load(servers({{"a", 1}}));
  const auto next = load("[server]\nidle_timeout = \"60s\"\n[log]\nlevel = \"info\"\n" +
                         servers({{"a", 1}}, "[upstreams.app.retry]\nattempts = 2"));
  EXPECT_TRUE(config_diff(old, next).empty()) << ::testing::PrintToString(config_diff(old, next));
  EXPECT_TRUE(config_diff(next, old).empty());
}

TEST(RestartChanges, AKeyThatNeedsARestartIsAnErrorAtTheKey) {
  const auto running = load("[server]\nworkers = 2\n" + servers({{"a", 1}}));
  const auto file = load("[server]\nworkers = 1\n" + servers({{"a", 1}}));
  const auto errors = restart_changes(running, file);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].to_string(),
            "t.toml:2:11: server.workers: changing this needs a restart (running: 2, file: 1)");
  EXPECT_TRUE(restart_changes(running, running).empty());
  // Live keys never are.
  EXPECT_TRUE(restart_changes(running, load("[server]\nworkers = 2\nidle_timeout = \"5s\"\n" +
                                            servers({{"a", 2}}))).empty());
}

// Read once at start-up (the state file restored, the wait before READY=1): a reload refuses them.
TEST(RestartChanges, StateFileAndHealthReadyTimeoutNeedARestart) {
  const auto running = load("[server]\nstate_file = \"/tmp/a.json\"\n" + servers({{"a", 1}}));
  const auto file = load("[server]\nstate_file = \"/tmp/b.json\"\nhealth_ready_timeout = \"3s\"\n" +
                         servers({{"a", 1}}));
  const auto errors = restart_changes(running, file);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].to_string(), "t.toml:3:24: server.health_ready_timeout: changing this needs a "
                                   "restart (running: 10s, file: 3s)");
  EXPECT_EQ(errors[1].to_string(), "t.toml:2:14: server.state_file: changing this needs a restart "
                                   "(running: \"/tmp/a.json\", file: \"/tmp/b.json\")");
}

TEST(RunningDrainDiff, AnApiDrainStaysUnlessTheFileChangesThatServersDrain) {
  const auto running = load(servers({{"a", 1}, {"b", 1}}));
  const std::vector<RunningServer> state{{"app", "a", true}, {"app", "b", false}};
  EXPECT_EQ(running_drain_diff(running, running, state),
            (std::vector<std::string>{
                "upstream app: server a drained through the API (file: drain = false); stays drained after the reload"}));
  auto text = servers({{"a", 1}, {"b", 1}});
  text.insert(text.find("weight = 1\n") + 11, "drain = true\n");  // a's drain in the file
  EXPECT_EQ(running_drain_diff(running, load(text), state),
            (std::vector<std::string>{
                "upstream app: server a drained through the API; the file's drain = true applies at the reload"}));
  EXPECT_TRUE(running_drain_diff(running, running, {{"app", "a", false}}).empty());
}

TEST(ConfigDiff, DrainAndUpstreams) {
  const auto old = load(servers({{"a", 1}}));
  auto text = servers({{"a", 1}});
  text += "drain = true\n[upstreams.other]\n[[route]]\npath_prefix = \"/\"\nupstream = \"app\"\n";
  const auto next = load(text);
  EXPECT_EQ(config_diff(old, next),
            (std::vector<std::string>{"upstream app: ~ server a drained", "+ upstream other (0 servers)",
                                      "+ route */ -> app"}));
}

TEST(ConfigDiff, RouteAdmissionChangesShow) {
  const std::string route = "[[route]]\npath_prefix = \"/\"\nupstream = \"app\"\n";
  const auto old = load(servers({{"a", 1}}) + route);
  const auto next = load(servers({{"a", 1}}) + route + "deny = [\"10.0.0.0/8\"]\n" +
                         "rate_limit = { rate = \"2/s\", burst = 4 }\n");
  EXPECT_EQ(config_diff(old, next),
            (std::vector<std::string>{"- route */ -> app",
                                      "+ route */ -> app (deny 10.0.0.0/8, rate 2/1000ms burst 4 key client_ip)"}));
}

// A route's header rules, rewrite or error pages are keys like any other: a change to them alone
// is listed, under the route's host and path_prefix (not its index, which a reorder changes).
TEST(ConfigDiff, ARouteKeyChangeAloneIsListed) {
  const std::string other = "[[route]]\npath_prefix = \"/other/\"\nupstream = \"app\"\n";
  const std::string api = "[[route]]\npath_prefix = \"/api/\"\nupstream = \"app\"\n";
  const auto old = load(servers({{"a", 1}}) + api + "request_headers = { set = { \"X-Env\" = \"a\" } }\n" + other);
  const auto next = load(servers({{"a", 1}}) + other + api + "request_headers = { set = { \"X-Env\" = \"b\" } }\n" +
                         "strip_prefix = true\n");
  EXPECT_EQ(config_diff(old, next),
            (std::vector<std::string>{
                "~ route */api/ request_headers: { set = { \"X-Env\" = \"a\" }, add = {  }, remove = [] } -> "
                "{ set = { \"X-Env\" = \"b\" }, add = {  }, remove = [] }",
                "~ route */api/ strip_prefix: false -> true"}));
}

TEST(ConfigDiff, HashUpstreamReportsTheShareOfKeysThatMove) {
  const char* hash = "balance = \"hash\"";
  std::initializer_list<std::pair<const char*, int>> ten = {{"s0", 1}, {"s1", 1}, {"s2", 1}, {"s3", 1}, {"s4", 1},
                                                            {"s5", 1}, {"s6", 1}, {"s7", 1}, {"s8", 1}, {"s9", 1}};
  const auto old = load(servers(ten, hash));
  const auto next = load(servers({{"s0", 1}, {"s1", 1}, {"s2", 1}, {"s3", 1}, {"s4", 1}, {"s5", 1},
                                  {"s6", 1}, {"s7", 1}, {"s8", 1}},
                                 hash));
  // Removing one of ten moves only its own keys: about a tenth, never much more.
  const auto share = hash_moved_share(old.upstreams[0], next.upstreams[0]);
  EXPECT_GT(share, 0.07);
  EXPECT_LT(share, 0.115);
  const auto lines = config_diff(old, next);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "upstream app: - server s9");
  EXPECT_TRUE(lines[1].starts_with("upstream app: hash: ")) << lines[1];
  EXPECT_TRUE(lines[1].ends_with("% of keys move to another server")) << lines[1];
  // The same servers in another order move nothing.
  EXPECT_EQ(hash_moved_share(old.upstreams[0], old.upstreams[0]), 0.0);
}

}  // namespace
}  // namespace sluice
