#pragma once
// admin::Control for the running process. The runtime hands it hooks into its control-thread
// state; every call happens on the control thread.
#include <functional>
#include <memory>
#include <optional>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include "sluice/admin/control.hpp"
#include "sluice/runtime/history.hpp"
#include "sluice/runtime/snapshot.hpp"

namespace sluice::telemetry { class MetricsText; }

namespace sluice {

// The state a person reads first: "draining" / "drained" over the health state (which a drain
// does not change), else up, slow_start, down or ejected.
const char* shown_state(const Endpoint& endpoint);

class RuntimeControl final : public admin::Control {
public:
  struct Hooks {
    std::function<std::shared_ptr<const Snapshot>()> snapshot;
    std::function<unsigned()> workers;
    std::function<Clock::time_point()> loaded_at;
    std::function<admin::ReloadOutcome(bool)> reload;  // true: watched ([reload] watch)
    std::function<bool()> ready;
    std::function<std::uint64_t()> reloads_ok;
    std::function<std::uint64_t()> reloads_failed;
    // TLS listener handshakes across workers: completed, failed.
    std::function<std::pair<std::uint64_t, std::uint64_t>()> tls_handshakes;
    std::function<std::size_t()> client_connections;
    std::function<std::size_t()> parked_connections;  // of client_connections
    std::function<std::optional<std::size_t>()> upstream_connections;  // nullopt: not counted
    // After a drain change (logs, records the event, closes idle pools): upstream, server, drain.
    std::function<void(const std::string&, Endpoint&, bool)> drained;
    std::function<const History&()> history;       // the dashboard's per-second samples
    std::function<admin::UpgradeOutcome(const std::string&)> upgrade;
    std::function<std::vector<std::string>()> reopen_logs;  // what failed, "" = none
    // Servers from DNS (discovery/): an upstream's sources for the status, and their metrics.
    std::function<boost::json::array(const std::string&)> discovery_status;
    std::function<void(telemetry::MetricsText&)> discovery_metrics;
    std::function<std::uint64_t()> access_log_dropped;  // lines lost to a full ring
    // The last reload's watch and the files rolled back (runtime/reload_watch.hpp), for
    // /api/status's "reload"; and the number of rollbacks, for /metrics.
    std::function<boost::json::object()> reload_watch;
    std::function<std::uint64_t()> rollbacks;
  };
  explicit RuntimeControl(Hooks hooks);

  std::string status_json() override;
  std::string dashboard_json(const admin::DashboardQuery& query) override;  // dashboard.cpp
  std::string metrics_text() override;
  admin::ReloadOutcome reload() override { return hooks_.reload(true); }
  admin::ReloadOutcome reload_unwatched() override { return hooks_.reload(false); }
  admin::UpgradeOutcome upgrade(const std::string& binary) override { return hooks_.upgrade(binary); }
  std::vector<std::string> reopen_logs() override { return hooks_.reopen_logs(); }
  std::string config_text() override;
  std::string config_source() override;
  admin::DrainOutcome set_drain(const std::string& upstream, const std::string& server, bool drain) override;
  bool ready() override;

private:
  Hooks hooks_;
};

}  // namespace sluice
