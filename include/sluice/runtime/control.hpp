#pragma once
// admin::Control for the running process: the admin API's documents (status, dashboard,
// metrics) rendered from what a RunningProcess reports, and its actions passed on to it. Every
// call happens on the control thread.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/json/object.hpp>

#include "sluice/admin/control.hpp"
#include "sluice/runtime/history.hpp"
#include "sluice/runtime/snapshot.hpp"

namespace sluice::discovery { class Discovery; }
namespace sluice {
class Fleet;
class FleetTicketKeys;
}  // namespace sluice

namespace sluice {

// The state a person reads first: "draining" / "drained" over the health state (which a drain
// does not change), else up, slow_start, down or ejected.
const char* shown_state(const Endpoint& endpoint);

// What the admin API reads and asks of the running process. The control loop implements it
// (runtime/control_loop.hpp); tests implement it over a snapshot of their own. Control thread
// only.
class RunningProcess {
public:
  virtual ~RunningProcess() = default;

  virtual std::shared_ptr<const Snapshot> snapshot() const = 0;
  virtual unsigned workers() const = 0;  // the counter slots that are written
  virtual Clock::time_point loaded_at() const = 0;
  virtual bool ready() const = 0;  // /readyz: listeners open, no SIGTERM yet
  virtual const History& history() const = 0;  // the dashboard's per-second samples
  // Servers from DNS (discovery/); null when no upstream has any.
  virtual const discovery::Discovery* discovery() const = 0;
  // The last reload's watch and the files rolled back (runtime/reload_watch.hpp), for
  // /api/status's "reload".
  virtual boost::json::object reload_watch() const = 0;

  // Counts for /metrics.
  virtual std::uint64_t reloads_ok() const = 0;
  virtual std::uint64_t reloads_failed() const = 0;
  virtual std::uint64_t rollbacks() const = 0;
  virtual std::uint64_t access_log_dropped() const = 0;  // lines lost to a full ring
  // TLS listener handshakes across workers: completed, failed.
  virtual std::pair<std::uint64_t, std::uint64_t> tls_handshakes() const = 0;
  virtual std::size_t client_connections() const = 0;
  virtual std::size_t parked_connections() const = 0;  // of client_connections
  virtual std::optional<std::size_t> upstream_connections() const = 0;  // nullopt: not counted

  // Actions.
  virtual admin::ReloadOutcome reload(bool watched) = 0;  // watched: [reload] watch applies
  virtual admin::UpgradeOutcome upgrade(const std::string& binary) = 0;
  virtual std::vector<std::string> reopen_logs() = 0;  // what failed; empty: done
  // After a drain change of `endpoint` in `upstream` (logs, records the event, closes idle pools).
  virtual void drained(const std::string& upstream, Endpoint& endpoint, bool drain) = 0;
  // Fleet mode ([fleet], runtime/fleet.hpp); null when the instance is on its own.
  virtual const Fleet* fleet() const { return nullptr; }
  // The fleet's session ticket keys (runtime/fleet_tickets.hpp); null without them.
  virtual const FleetTicketKeys* fleet_tickets() const { return nullptr; }
};

class RuntimeControl final : public admin::Control {
public:
  explicit RuntimeControl(RunningProcess& process) : process_(process) {}

  std::string status_json() override;
  std::string fleet_json() override;
  std::string dashboard_json(const admin::DashboardQuery& query) override;  // dashboard.cpp
  std::string metrics_text() override;                                       // metric_table.cpp
  admin::ReloadOutcome reload() override { return process_.reload(true); }
  admin::ReloadOutcome reload_unwatched() override { return process_.reload(false); }
  admin::UpgradeOutcome upgrade(const std::string& binary) override { return process_.upgrade(binary); }
  std::vector<std::string> reopen_logs() override { return process_.reopen_logs(); }
  std::string config_text() override;
  std::string config_source() override;
  admin::DrainOutcome set_drain(const std::string& upstream, const std::string& server, bool drain) override;
  bool ready() override { return process_.ready(); }

private:
  RunningProcess& process_;
};

}  // namespace sluice
