#pragma once
// What the admin API may ask of the running process. Implemented by the runtime; every call is
// made on the control thread (the admin listener runs on the control io_context), so an
// implementation may touch control-thread state directly.
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::admin {

struct ReloadOutcome {
  bool ok = false;
  std::vector<std::string> errors;  // "FILE:LINE:COL: key.path: message"
  unsigned long long version = 0;   // config version now serving
  // How long the reload is watched ([reload] watch, docs/operations.md); 0 = not watched.
  unsigned long long watch_ms = 0;
};

struct UpgradeOutcome {
  bool ok = false;
  long pid = 0;       // the new process
  std::string error;  // why it did not take over
};

enum class DrainOutcome { done, no_such_upstream, no_such_server };

// GET /api/dashboard?tick=N&event=M: what the page already holds, so that only newer history
// samples and events are sent (0 = everything kept).
struct DashboardQuery {
  std::uint64_t after_tick = 0;
  std::uint64_t after_event = 0;
};

class Control {
public:
  virtual ~Control() = default;
  // The JSON document of GET /api/status (see docs/admin.md).
  virtual std::string status_json() = 0;
  // The JSON document of GET /api/dashboard: status rows with rates, history, events
  // (docs/dashboard.md).
  virtual std::string dashboard_json(const DashboardQuery& query) = 0;
  // The JSON document of GET /api/fleet (docs/fleet.md); "" = not in a fleet (404).
  virtual std::string fleet_json() { return {}; }
  // Prometheus text exposition 0.0.4 of GET /metrics.
  virtual std::string metrics_text() = 0;
  virtual ReloadOutcome reload() = 0;
  // POST /api/reload?watch=0 (`sluice reload --no-watch`): a deliberate change, applied without
  // the watch that would roll it back, even when this file was rolled back before.
  virtual ReloadOutcome reload_unwatched() { return reload(); }
  // POST /api/upgrade: start `binary` ("" = the running one) with the listening sockets; the
  // answer comes once it serves (this process then drains and exits) or failed to start.
  virtual UpgradeOutcome upgrade(const std::string& binary) {
    (void)binary;
    return {false, 0, "binary upgrade is not supported here"};
  }
  // POST /api/logs/reopen: the log files opened again by their paths (logrotate). Returns what
  // could not be reopened (those logs keep their old file); empty = done.
  virtual std::vector<std::string> reopen_logs() { return {"log reopen is not supported here"}; }
  // GET /api/config: the TOML text of the configuration now serving, and the file it came from.
  virtual std::string config_text() = 0;
  virtual std::string config_source() = 0;
  // drain = false: undrain. `server` is the server's identity (name, else address).
  virtual DrainOutcome set_drain(const std::string& upstream, const std::string& server, bool drain) = 0;
  // GET /readyz: config loaded, listeners open, no SIGTERM yet.
  virtual bool ready() = 0;
};

}  // namespace sluice::admin
