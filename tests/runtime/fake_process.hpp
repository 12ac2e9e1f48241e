#pragma once
// A RunningProcess for tests of what the admin API renders: the test sets the snapshot and the
// worker count; the counts are fixed, distinct values; drains are recorded.
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "sluice/runtime/control.hpp"

namespace sluice::test {

struct FakeProcess final : RunningProcess {
  std::shared_ptr<const Snapshot> current;
  unsigned worker_count = 2;
  History samples;
  std::vector<std::string> drains;  // "upstream server on|off", as drained() saw them

  std::shared_ptr<const Snapshot> snapshot() const override { return current; }
  unsigned workers() const override { return worker_count; }
  Clock::time_point loaded_at() const override { return steady_clock().now(); }
  bool ready() const override { return true; }
  const History& history() const override { return samples; }
  const discovery::Discovery* discovery() const override { return nullptr; }
  boost::json::object reload_watch() const override { return {{"state", "none"}}; }
  std::uint64_t reloads_ok() const override { return 3; }
  std::uint64_t reloads_failed() const override { return 1; }
  std::uint64_t rollbacks() const override { return 2; }
  std::uint64_t access_log_dropped() const override { return 4; }
  std::pair<std::uint64_t, std::uint64_t> tls_handshakes() const override { return {6, 1}; }
  std::size_t client_connections() const override { return 12; }
  std::size_t parked_connections() const override { return 5; }
  std::optional<std::size_t> upstream_connections() const override { return upstream; }
  admin::ReloadOutcome reload(bool) override { return {true, {}, 8}; }
  admin::UpgradeOutcome upgrade(const std::string&) override { return {false, 0, "not here"}; }
  std::vector<std::string> reopen_logs() override { return {}; }
  void drained(const std::string& u, Endpoint& ep, bool on) override {
    drains.push_back(u + " " + ep.identity() + (on ? " on" : " off"));
  }

  std::optional<std::size_t> upstream;  // nullopt: the workers did not answer in time
};

}  // namespace sluice::test
