#include "sluice/runtime/diff.hpp"

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

TEST(ConfigDiff, DrainAndUpstreams) {
  const auto old = load(servers({{"a", 1}}));
  auto text = servers({{"a", 1}});
  text += "drain = true\n[upstreams.other]\n[[route]]\npath_prefix = \"/\"\nupstream = \"app\"\n";
  const auto next = load(text);
  EXPECT_EQ(config_diff(old, next),
            (std::vector<std::string>{"upstream app: ~ server a drained", "+ upstream other (0 servers)",
                                      "+ route */ -> app"}));
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
