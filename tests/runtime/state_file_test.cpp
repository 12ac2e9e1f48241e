#include "sluice/runtime/state_file.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

SavedState example() {
  SavedState s;
  s.written_at = 1'700'000'000'000ms;
  health::SavedHealth h;
  h.active_up = false;
  h.ejection_level = 2;
  h.ejected_for = 3s;
  h.slow_start_elapsed = 1200ms;
  s.servers.push_back({"app", "app-1", true, h});
  s.servers.push_back({"app", "127.0.0.1:9002", false, std::nullopt});
  return s;
}

TEST(StateFileFormat, RoundTrips) {
  std::string why;
  const auto parsed = parse_state(format_state(example()), &why);
  ASSERT_TRUE(parsed) << why;
  EXPECT_EQ(parsed->written_at, 1'700'000'000'000ms);
  ASSERT_EQ(parsed->servers.size(), 2u);
  const auto& a = parsed->servers[0];
  EXPECT_EQ(a.upstream, "app");
  EXPECT_EQ(a.server, "app-1");
  EXPECT_TRUE(a.drained);
  ASSERT_TRUE(a.health);
  EXPECT_EQ(a.health->active_up, false);
  EXPECT_EQ(a.health->ejection_level, 2u);
  EXPECT_EQ(a.health->ejected_for, 3s);
  EXPECT_EQ(a.health->slow_start_elapsed, 1200ms);
  EXPECT_FALSE(parsed->servers[1].drained);
  EXPECT_FALSE(parsed->servers[1].health);
}

TEST(StateFileFormat, CorruptOrForeignFilesAreRejectedWithAReason) {
  const auto text = format_state(example());
  struct Case {
    std::string text;
    std::string why;
  };
  const Case cases[] = {
      {text.substr(0, text.size() / 2), "not JSON"},
      {"", "not JSON"},
      {R"({"servers": []})", "not a sluice state file"},
      {R"([1, 2])", "not a sluice state file"},
      {R"({"format": "sluice-state", "version": 2, "servers": []})", "unknown state file version"},
      {R"({"format": "sluice-state", "version": 1})", "no servers array"},
      {R"({"format": "sluice-state", "version": 1, "servers": [{"upstream": "a"}]})",
       "without upstream, server and drained"},
      {R"({"format": "sluice-state", "version": 1, "servers": [{"upstream": "a", "server": "b",
          "drained": false, "ejection_level": -1}]})",
       "wrong type"},
  };
  for (const auto& c : cases) {
    std::string why;
    EXPECT_FALSE(parse_state(c.text, &why)) << c.text;
    EXPECT_NE(why.find(c.why), std::string::npos) << c.text << " -> " << why;
  }
}

class StateFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("sluice-state-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "state.json").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::shared_ptr<const Snapshot> snapshot(EndpointDirectory& directory) {
    auto result = config::load_string(R"(
[server]
listen = ["127.0.0.1:0"]
[upstreams.app]
[upstreams.app.health]
path = "/health"
[upstreams.app.passive]
max_ejected_percent = 100
[[upstreams.app.servers]]
address = "127.0.0.1:9001"
name = "app-1"
[[upstreams.app.servers]]
address = "127.0.0.1:9002"
name = "app-2"
)",
                                      "test.toml");
    EXPECT_TRUE(result.ok());
    return build_snapshot(std::make_shared<const config::Config>(std::move(*result.config)),
                          directory, 1);
  }

  std::string read() {
    std::ifstream f(path_);
    return {std::istreambuf_iterator<char>(f), {}};
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(StateFileTest, AnApiDrainSurvivesIntoANewProcessAndConfigDrainsAreNotSaved) {
  EndpointDirectory old_directory{steady_clock()};
  const auto old = snapshot(old_directory);
  Endpoint* app1 = old->upstreams[0]->endpoints()[0];
  app1->set_draining(true);
  app1->set_drained_by_api(true);
  StateFile file(path_);
  file.update(*old);

  EndpointDirectory directory{steady_clock()};
  const auto fresh = snapshot(directory);
  StateFile(path_).restore(*fresh);
  EXPECT_TRUE(fresh->upstreams[0]->endpoints()[0]->draining());
  EXPECT_TRUE(fresh->upstreams[0]->endpoints()[0]->drained_by_api());
  EXPECT_FALSE(fresh->upstreams[0]->endpoints()[1]->draining());
}

TEST_F(StateFileTest, UpdateWritesOnlyOnChangeAndAtomically) {
  EndpointDirectory directory{steady_clock()};
  const auto snap = snapshot(directory);
  StateFile file(path_);
  file.update(*snap);
  const auto first = std::filesystem::last_write_time(path_);
  std::filesystem::remove(path_);
  file.update(*snap);  // nothing changed: no write
  EXPECT_FALSE(std::filesystem::exists(path_));
  snap->upstreams[0]->endpoints()[1]->set_draining(true);
  snap->upstreams[0]->endpoints()[1]->set_drained_by_api(true);
  file.update(*snap);
  EXPECT_NE(read().find(R"("server":"app-2","drained":true)"), std::string::npos) << read();
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));  // renamed into place
  (void)first;
}

TEST_F(StateFileTest, ServersThatNoLongerExistAreIgnored) {
  SavedState s;
  s.servers.push_back({"app", "gone", true, std::nullopt});
  s.servers.push_back({"other", "app-1", true, std::nullopt});
  EndpointDirectory directory{steady_clock()};
  const auto snap = snapshot(directory);
  EXPECT_EQ(apply_state(s, *snap, 0ms, "test"), 0u);
  EXPECT_FALSE(snap->upstreams[0]->endpoints()[0]->draining());
}

TEST_F(StateFileTest, TimeStoppedCountsAgainstAnEjection) {
  EndpointDirectory directory{steady_clock()};
  const auto snap = snapshot(directory);
  EndpointDirectory other_directory{steady_clock()};
  const auto other = snapshot(other_directory);
  SavedState s;
  s.written_at = 1000s;
  health::SavedHealth h;
  h.active_up = true;
  h.ejection_level = 1;
  h.ejected_for = 5s;
  s.servers.push_back({"app", "app-1", false, h});
  apply_state(s, *snap, 1006s, "test");  // stopped for 6 s: the ejection is over
  EXPECT_EQ(snap->upstreams[0]->endpoints()[0]->state(), ServerState::up);
  apply_state(s, *other, 1002s, "test");  // stopped for 2 s: 3 s left
  EXPECT_EQ(other->upstreams[0]->endpoints()[0]->state(), ServerState::ejected);
}

TEST_F(StateFileTest, ATruncatedFileIsIgnored) {
  {
    std::ofstream f(path_);
    f << R"({"format": "sluice-state", "version": 1, "servers": [{"upstream": "app", "ser)";
  }
  EndpointDirectory directory{steady_clock()};
  const auto snap = snapshot(directory);
  StateFile(path_).restore(*snap);  // logs, does not throw
  EXPECT_FALSE(snap->upstreams[0]->endpoints()[0]->draining());
}

}  // namespace
}  // namespace sluice
