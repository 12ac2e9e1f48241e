#pragma once
// The control thread: one io_context, run by the caller of run(), that owns what the workers
// share (the config, the snapshot, the endpoint directory, the listeners) and runs the admin API,
// the health probes, DNS, reloads and their watch, the signals, shutdown and binary upgrades.
//
// Everything it does is a named member: its signals (SIGHUP, SIGUSR1, SIGUSR2, SIGTERM, SIGINT:
// on_hangup .. on_terminate), its timers (the periodic health clock, dashboard history and
// reload watch; the readiness timeout, shutdown_delay and the drain's poll) and the admin API's
// actions (RunningProcess, which RuntimeControl serves). Control thread only: the workers see it
// through the snapshot they are handed and the shutdown flag.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "sluice/config/config.hpp"
#include "sluice/runtime/control.hpp"
#include "sluice/runtime/history.hpp"
#include "sluice/runtime/listeners.hpp"
#include "sluice/runtime/reload_watch.hpp"
#include "sluice/runtime/systemd.hpp"
#include "sluice/tls/ocsp_stapler.hpp"
#include "sluice/upstream/upstream.hpp"

namespace sluice {

class AccessLog;
class ConfigWatch;
class Fleet;
class FleetTicketKeys;
class FleetAcme;
class InheritedListeners;
class StateFile;
class Worker;
namespace admin { class Server; }
namespace discovery { class Discovery; }
namespace tls::acme { class AcmeService; }
namespace health { class Prober; }

class ControlLoop final : public RunningProcess {
public:
  ControlLoop(config::Config config, std::string config_path);
  ~ControlLoop() override;
  ControlLoop(const ControlLoop&) = delete;
  ControlLoop& operator=(const ControlLoop&) = delete;

  // Starts the process (snapshot, workers, listeners, admin, probes, timers), then runs the
  // control thread until shutdown; returns the process exit code.
  int run();
  // The control thread's io_context: work for the loop is posted here.
  boost::asio::io_context& io() noexcept { return io_; }

  // SIGTERM and SIGINT: readiness fails at once, the listeners keep accepting for
  // shutdown_delay, then the drain (shutdown_timeout), then run() returns. Once only.
  void shut_down(int sig);

  // RunningProcess: what the admin API reads...
  std::shared_ptr<const Snapshot> snapshot() const override { return snapshot_; }
  unsigned workers() const override { return static_cast<unsigned>(workers_.size()); }
  Clock::time_point loaded_at() const override { return loaded_at_; }
  bool ready() const override { return ready_; }
  const History& history() const override { return history_; }
  const discovery::Discovery* discovery() const override { return discovery_.get(); }
  boost::json::object reload_watch() const override;
  std::uint64_t reloads_ok() const override { return reloads_ok_; }
  std::uint64_t reloads_failed() const override { return reloads_failed_; }
  std::uint64_t rollbacks() const override { return rollbacks_; }
  std::uint64_t access_log_dropped() const override;
  std::pair<std::uint64_t, std::uint64_t> tls_handshakes() const override;
  std::size_t client_connections() const override;
  std::size_t parked_connections() const override;
  std::optional<std::size_t> upstream_connections() const override;
  // ... and what it asks: the same actions as the signals, and a drain's consequences.
  admin::ReloadOutcome reload(bool watched) override;
  admin::UpgradeOutcome upgrade(const std::string& binary) override;
  std::vector<std::string> reopen_logs() override { return reopen_logs("admin API"); }
  void drained(const std::string& upstream, Endpoint& endpoint, bool drain) override;
  const Fleet* fleet() const override { return fleet_.get(); }
  const FleetTicketKeys* fleet_tickets() const override { return fleet_tickets_.get(); }

private:
  // A periodic job: `tick` at start, then every `period` until shutdown.
  struct Periodic {
    boost::asio::steady_timer timer;
    std::chrono::milliseconds period;
    void (ControlLoop::*tick)();
  };
  // What a signal does, and whether the loop awaits the next one afterwards.
  struct SignalAction {
    int signal;
    void (ControlLoop::*handle)(int sig);
    bool again;
  };
  static const SignalAction signal_actions[5];  // SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2
  struct AdminChange;  // control_reload.cpp: a reload's admin listener, prepared, then committed
  struct LogFiles;     // control_reload.cpp: a reload's log files, opened, then adopted

  // Start-up, in order (control_loop.cpp); a false return (logged) ends run() with 1.
  bool build_first_snapshot();
  void restore_server_state();
  void start_fleet();
  void start_fleet_tickets();  // fleet_tickets.cpp
  void apply_fleet_drain(const std::string& upstream, Endpoint& endpoint, bool drain);
  void note_drain(const std::string& upstream, Endpoint& endpoint, bool drain, std::string_view via);
  void make_workers();
  bool open_listeners(InheritedListeners& inherited);
  bool open_first_admin(std::optional<int> admin_fd);
  bool start_serving();
  void start_prober();
  void notify_ready_when_probed();
  void notify_ready(std::string_view why);
  bool first_probe_round_done() const;
  std::string status_line() const;  // systemd's STATUS=

  // Signals.
  void await_signal();
  void on_signal(boost::system::error_code ec, int sig);
  void on_terminate(int sig);      // SIGTERM, SIGINT: shut_down()
  void on_hangup(int sig);         // SIGHUP: reload the file
  void on_reopen_logs(int sig);    // SIGUSR1: reopen the log files (logrotate)
  void on_upgrade(int sig);        // SIGUSR2: upgrade to the binary this process started from

  // Timers.
  void every(Periodic& job);
  void after(boost::asio::steady_timer& timer, Clock::duration delay, void (ControlLoop::*then)());
  void on_health_tick();     // ends ejections, steps slow start, writes the state file
  void on_history_tick();    // the dashboard's per-second sample
  void on_watch_tick();      // the reload watch's count and verdict
  void on_ready_timeout();   // health_ready_timeout: ready without every first probe
  void on_shutdown_delay();  // shutdown_delay over: stop accepting
  void on_drain_poll();      // the drain: stop once idle or at shutdown_timeout

  // Shutdown and upgrade.
  void stop_accepting();
  void stop_loop();
  void hand_over();
  std::string refuse_upgrade() const;
  std::vector<std::string> reopen_logs(std::string_view why);

  // Reload (control_reload.cpp).
  admin::ReloadOutcome reload_config(bool watched);
  void apply_config(const std::shared_ptr<const config::Config>& cfg);
  std::shared_ptr<const Snapshot> build(const std::shared_ptr<const config::Config>& cfg,
                                        std::uint64_t version);
  void publish(std::shared_ptr<const Snapshot> snapshot);
  void retire_removed(const Snapshot& old, const Snapshot& now);
  void update_probes();
  std::unique_ptr<admin::Server> open_admin(const config::AdminSection& admin,
                                            int inherited_fd = -1);
  AdminChange prepare_admin(const config::AdminSection& now);
  void commit_admin(AdminChange change);
  void retire_admin(std::unique_ptr<admin::Server> old);
  static LogFiles open_log_files(const config::LogSection& was, const config::LogSection& now);
  void apply_logging(const config::LogSection& was, const config::LogSection& now, LogFiles files);
  void apply_watch(bool watch);
  // DNS (control_reload.cpp).
  void follow_dns(const config::Config& cfg);
  void await_first_answers();
  void apply_membership();
  // The reload watch (control_reload.cpp).
  void record_traffic();
  void start_watch(std::shared_ptr<const config::Config> previous, std::string fingerprint,
                   std::vector<UpstreamUp> up_before, bool watched, admin::ReloadOutcome& out);
  void roll_back(const WatchVerdict& verdict);

  std::string config_path_;
  std::shared_ptr<const config::Config> config_;
  EndpointDirectory directory_{steady_clock()};
  std::shared_ptr<const Snapshot> snapshot_;
  std::uint64_t version_ = 0;
  std::unique_ptr<AccessLog> access_log_;
  std::vector<std::unique_ptr<Worker>> workers_;
  // Everything below that holds handlers or sockets of the loop is destroyed before it.
  boost::asio::io_context io_;
  tls::OcspStapler ocsp_stapler_{io_};  // the listener certificates' OCSP staples
  Listeners listeners_;
  RuntimeControl admin_api_{*this};  // what the admin listener serves
  std::unique_ptr<admin::Server> admin_server_;
  std::unique_ptr<ConfigWatch> config_watch_;  // [server] watch_config
  std::unique_ptr<health::Prober> prober_;
  std::unique_ptr<Fleet> fleet_;  // [fleet]; restart-only
  std::unique_ptr<FleetTicketKeys> fleet_tickets_;  // [fleet] with TLS listeners; restart-only
  std::vector<std::string> probed_upstreams_;
  bool shutting_down_ = false;
  bool ready_ = false;  // /readyz: listeners open, no SIGTERM yet
  Clock::time_point loaded_at_;
  std::uint64_t reloads_ok_ = 0;
  std::uint64_t reloads_failed_ = 0;
  std::atomic<bool> shutdown_flag_{false};  // read by every worker
  History history_;                         // the dashboard's per-second samples
  ServiceNotifier notifier_{io_};
  std::unique_ptr<StateFile> state_file_;  // [server] state_file; restart-only
  bool notified_ready_ = false;  // READY=1 sent (reload notifications only after it)
  pid_t upgraded_to_ = 0;        // the new process a binary upgrade handed the listeners to
  std::string binary_;           // what SIGUSR2 starts again
  // Servers from DNS; made when a config first asks for them ([dns] is restart-only).
  std::unique_ptr<discovery::Discovery> discovery_;
  // In a fleet: the ACME certificates shared through Redis; outlives the ACME client's thread,
  // which asks it (runtime/fleet_acme.hpp).
  std::unique_ptr<FleetAcme> fleet_acme_;
  // The ACME client's thread; null without acme tables (src/runtime/acme.cpp).
  std::unique_ptr<tls::acme::AcmeService> acme_;
  void start_acme();
  bool membership_pending_ = false;  // a rebuild for DNS changes is posted
  // The watch after a reload ([reload], runtime/reload_watch.hpp).
  ReloadWatch reload_watch_{steady_clock()};
  TrafficMeter traffic_;
  std::shared_ptr<const config::Config> watched_previous_;  // what a rollback restores
  std::string watched_fingerprint_;                         // the file being watched
  std::uint64_t watched_version_ = 0;
  std::string watch_state_ = "none";  // none, watching, applied, rolled_back, unwatched
  std::string verdict_;               // the last verdict, as logged
  struct RolledBack {
    std::uint64_t version = 0;
    std::string verdict;
  };
  std::map<std::string, RolledBack> rolled_back_;  // by config_fingerprint: refused unless --no-watch
  std::uint64_t rollbacks_ = 0;
  std::string status_note_;  // systemd's STATUS= after a rollback, until the next reload
  // Signals and timers.
  boost::asio::signal_set signals_{io_};
  boost::asio::steady_timer ready_timer_{io_};  // health_ready_timeout
  boost::asio::steady_timer drain_timer_{io_};  // shutdown_delay, then the drain's polls
  Clock::time_point drain_deadline_{};          // shutdown_timeout's end
  // The periodic jobs: the health clock, the dashboard's history (with an admin listener), the
  // reload watch's count.
  Periodic health_clock_{boost::asio::steady_timer{io_}, std::chrono::milliseconds(100),
                         &ControlLoop::on_health_tick};
  Periodic history_clock_{boost::asio::steady_timer{io_}, std::chrono::seconds(1),
                          &ControlLoop::on_history_tick};
  Periodic watch_clock_{boost::asio::steady_timer{io_}, std::chrono::milliseconds(500),
                        &ControlLoop::on_watch_tick};
};

}  // namespace sluice
