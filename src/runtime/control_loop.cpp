// The control loop (control_loop.hpp): start-up, the signals and timers, shutdown and binary
// upgrade, and what the admin API reads. Reloads are in control_reload.cpp.
#include "sluice/runtime/control_loop.hpp"

#include <signal.h>
#include <unistd.h>

#include <future>
#include <random>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "sluice/admin/server.hpp"
#include "sluice/discovery/discovery.hpp"
#include "sluice/tls/acme_client.hpp"
#include "sluice/health/log.hpp"
#include "sluice/health/prober.hpp"
#include "sluice/runtime/config_watch.hpp"
#include "sluice/runtime/fd_budget.hpp"
#include "sluice/runtime/fleet.hpp"
#include "sluice/runtime/fleet_acme.hpp"
#include "sluice/runtime/fleet_tickets.hpp"
#include "sluice/runtime/listen_fds.hpp"
#include "sluice/runtime/state_file.hpp"
#include "sluice/runtime/upgrade.hpp"
#include "sluice/runtime/worker.hpp"
#include "sluice/telemetry/access_log.hpp"
#include "sluice/telemetry/event_ring.hpp"
#include "sluice/telemetry/log_sink.hpp"

namespace sluice {

namespace net = boost::asio;

ControlLoop::ControlLoop(config::Config config, std::string config_path)
    : config_path_(std::move(config_path)),
      config_(std::make_shared<const config::Config>(std::move(config))),
      binary_(own_binary()) {}

ControlLoop::~ControlLoop() = default;

int ControlLoop::run() {
  start_fleet_tickets();
  if (!build_first_snapshot()) return 1;
  restore_server_state();
  start_fleet();
  // Handlers go in before anything is announced: a SIGTERM right after "started" must be a
  // graceful shutdown, not the default action.
  for (const auto& action : signal_actions) signals_.add(action.signal);
  make_workers();
  auto inherited = InheritedListeners::from_environment();
  auto admin_fd = inherited.take_named(admin_fd_name);
  if (!open_listeners(inherited)) return 1;
  if (!open_first_admin(admin_fd)) return 1;
  if (!start_serving()) return 1;
  await_signal();

  io_.run();
  for (auto& w : workers_) w->join();
  acme_.reset();  // an order in progress is abandoned (a request to the CA finishes first)
  if (state_file_) state_file_->write(*snapshot_);
  access_log_->flush();
  spdlog::info("sluice stopped");
  return 0;
}

// The access log, the first answers from DNS and the first snapshot; false (logged) when one of
// them fails and sluice must not start.
bool ControlLoop::build_first_snapshot() {
  try {
    access_log_ = std::make_unique<AccessLog>(config_->log);
  } catch (const std::exception& e) {
    spdlog::error("log.access_file: {}", e.what());
    return false;
  }
  try {
    follow_dns(*config_);
    await_first_answers();
    snapshot_ = build(config_, ++version_);
  } catch (const std::exception& e) {
    spdlog::error("{}: {}", config_path_, e.what());
    return false;
  }
  return true;
}

// Before any request or probe: a server drained or down in the process this one replaces (a
// binary upgrade hands its state over), else at the last stop (the state file), starts that way.
void ControlLoop::restore_server_state() {
  const auto& path = config_->server.state_file;
  if (!path.empty()) state_file_ = std::make_unique<StateFile>(path);
  if (const auto handed = take_upgrade_state())
    restore_state_text(*handed, *snapshot_, "the process this one replaces");
  else if (state_file_)
    state_file_->restore(*snapshot_);
}

void ControlLoop::make_workers() {
  const unsigned n = config_->server.worker_count();
  const std::uint32_t per_worker = connections_per_worker(*config_, n);
  for (unsigned i = 0; i < n; ++i)
    workers_.push_back(std::make_unique<Worker>(i, steady_clock(), *access_log_, snapshot_, per_worker,
                                                 shutdown_flag_));
}

// Every worker gets its own SO_REUSEPORT socket per address, so the kernel spreads connections.
// A socket inherited from systemd or from the process we replace (listen_fds.hpp) is taken
// instead of bound: a binary upgrade passes every old worker's socket, each keeping its accept
// queue (Listeners::bind_new). False (logged) when an address cannot be had.
bool ControlLoop::open_listeners(InheritedListeners& inherited) {
  try {
    const auto wanted = Listeners::of(*config_);
    listeners_.set_defer_accept(config_->server.defer_accept);
    listeners_.apply(listeners_.bind_new(io_, wanted, workers_.size(), &inherited), wanted,
                      workers_);
    inherited.close_unused();
  } catch (const ListenError& e) {
    spdlog::error("{}", e.what());
    return false;
  }
  return true;
}

// The admin listener at start-up, on the socket an upgrade passed (`admin_fd`) if there is one;
// a passed socket that no [admin] wants any more is closed. False (logged) when it cannot open.
bool ControlLoop::open_first_admin(std::optional<int> admin_fd) {
  if (config_->admin.enabled) {
    try {
      admin_server_ = open_admin(config_->admin, admin_fd.value_or(-1));
      admin_fd.reset();
    } catch (const std::exception& e) {
      spdlog::error("admin: {}", e.what());
      return false;
    }
  }
  if (admin_fd) ::close(*admin_fd);
  return true;
}

// The prober on the control thread: each result counted on its server, and readiness told once
// every health-checked server has had its first probe.
void ControlLoop::start_prober() {
  prober_ = std::make_unique<health::Prober>(io_, steady_clock(), std::random_device{}());
  prober_->on_transition = [](const health::ProbeTarget& t, const health::Transition& tr) {
    health::log_transition(t.upstream, *t.endpoint, tr);
  };
  prober_->on_probe = [this](const health::ProbeTarget& t, const health::ProbeResult& r) {
    (r.passed ? t.endpoint->probes_passed : t.endpoint->probes_failed).fetch_add(1, std::memory_order_relaxed);
    if (fleet_) fleet_->probed(t.upstream, t.endpoint->identity(), r);
    if (!notified_ready_ && first_probe_round_done()) notify_ready("first health probes done");
  };
  // Fleet mode: a server is probed by the one instance that holds its lease.
  if (fleet_)
    prober_->may_probe = [this](const health::ProbeTarget& t) {
      return fleet_->may_probe(t.upstream, t.endpoint->identity());
    };
  update_probes();
}

// Ready at once when nothing is health-checked (or health_ready_timeout is 0), else after the
// first probe of every server or health_ready_timeout, whichever comes first.
void ControlLoop::notify_ready_when_probed() {
  const auto timeout = config_->server.health_ready_timeout;
  if (first_probe_round_done() || timeout.count() == 0) return notify_ready("listening");
  after(ready_timer_, timeout, &ControlLoop::on_ready_timeout);
}

void ControlLoop::on_ready_timeout() {
  notify_ready("health_ready_timeout passed before every server was probed");
}

// systemd's STATUS= line: what `systemctl status` shows.
std::string ControlLoop::status_line() const {
  std::size_t up = 0;
  std::size_t total = 0;
  for (const auto& u : snapshot_->upstreams)
    for (const Endpoint* ep : u->endpoints()) {
      ++total;
      up += ep->available() ? 1 : 0;
    }
  return "config version " + std::to_string(version_) + ", " + std::to_string(up) + "/" +
         std::to_string(total) + " servers up" + (status_note_.empty() ? "" : "; " + status_note_);
}

// True once every health-checked server has had its first probe: before that a server that is
// down still counts as up, and a service manager told "ready" would send traffic to it.
bool ControlLoop::first_probe_round_done() const {
  for (const auto& u : snapshot_->upstreams) {
    if (!u->config().health) continue;
    for (const Endpoint* ep : u->endpoints())
      if (ep->probes_passed.load(std::memory_order_relaxed) +
              ep->probes_failed.load(std::memory_order_relaxed) ==
          0)
        return false;
  }
  return true;
}

void ControlLoop::notify_ready(std::string_view why) {
  if (notified_ready_ || shutting_down_) return;
  notified_ready_ = true;
  spdlog::info("ready ({})", why);
  notifier_.ready(status_line());
  report_upgrade_ready();  // a binary upgrade's old process may stop accepting now
}

// The workers accept, the prober and the control loop's timers start, and sluice says so.
// False (logged) when `[server] watch_config` cannot watch the file.
bool ControlLoop::start_serving() {
  for (auto& w : workers_) w->start();
  loaded_at_ = steady_clock().now();
  ready_ = true;
  start_prober();
  start_acme();
  // The pid is in the line because sluice writes no pid file: a supervisor (systemd's MainPID)
  // or this line is where a signal's target comes from.
  spdlog::info("sluice {} started: pid {}, {} worker(s), config {} (version {})", SLUICE_VERSION,
               ::getpid(), workers_.size(), config_path_, version_);
  notify_ready_when_probed();
  notifier_.start_watchdog();
  every(health_clock_);
  if (config_->admin.enabled) every(history_clock_);
  every(watch_clock_);
  if (config_->server.watch_config) {
    try {
      config_watch_ = std::make_unique<ConfigWatch>(io_, config_path_, [this] { reload(true); });
    } catch (const std::exception& e) {
      spdlog::error("watch_config: {}", e.what());
      return false;
    }
  }
  return true;
}

// Every timer and listener of the control loop stopped: once the workers are, nothing is left
// for it to run and run() returns.
void ControlLoop::stop_loop() {
  signals_.cancel();
  health_clock_.timer.cancel();
  history_clock_.timer.cancel();
  watch_clock_.timer.cancel();
  ready_timer_.cancel();
  notifier_.stop_watchdog();
  prober_->stop();
  if (fleet_) fleet_->stop();
  if (fleet_tickets_) fleet_tickets_->stop();
  if (fleet_acme_) fleet_acme_->stop();
  ocsp_stapler_.stop();
  if (discovery_) discovery_->stop();
  if (admin_server_) admin_server_->stop();
  if (config_watch_) config_watch_->stop();
}

// The drain's poll: the workers stop when their last connection closed or shutdown_timeout
// passed, whichever comes first.
void ControlLoop::on_drain_poll() {
  std::size_t active = 0;
  for (auto& w : workers_) active += w->active_sessions();
  if (active == 0 || steady_clock().now() >= drain_deadline_) {
    if (active != 0) spdlog::warn("shutdown timeout: closing {} connection(s)", active);
    for (auto& w : workers_) w->stop();
    stop_loop();
    return;
  }
  after(drain_timer_, std::chrono::milliseconds(20), &ControlLoop::on_drain_poll);
}

// Stop accepting; in-flight requests get shutdown_timeout; then run() returns.
void ControlLoop::stop_accepting() {
  // Logged so that the end of shutdown_delay is observable on sluice's own clock.
  spdlog::info("shutdown: no longer accepting connections");
  drain_deadline_ = steady_clock().now() + config_->server.shutdown_timeout;
  shutdown_flag_.store(true, std::memory_order_relaxed);
  for (auto& w : workers_) w->begin_shutdown();
  on_drain_poll();
}

// The new process of a binary upgrade accepts: this one stops at once (no shutdown_delay) and
// drains; the new one answers the admin API from now on.
void ControlLoop::hand_over() {
  shutting_down_ = true;
  ready_ = false;
  if (admin_server_) admin_server_->stop_accepting();
  stop_accepting();
}

// Why an upgrade cannot start now (empty: it can). One process upgrades at a time, and only once
// it serves: `systemctl kill -s USR2` signals every process of the unit, the new one of an upgrade
// under way too, which would otherwise start a third while the first waits for it.
std::string ControlLoop::refuse_upgrade() const {
  if (upgraded_to_ != 0) return fmt::format("this process already handed over to pid {}", upgraded_to_);
  if (shutting_down_) return "this process is shutting down";
  if (!notified_ready_) return "this process is still starting (it can upgrade once it is ready)";
  return {};
}

// Binary upgrade (POST /api/upgrade, SIGUSR2): the new process gets every listening socket
// (admin included) and the servers' state as of now (drains, verdicts, ejections, ramps; the
// state file is written too); once it accepts, this one stops accepting and drains like at
// SIGTERM. Until then, and if it fails, this one serves as before.
admin::UpgradeOutcome ControlLoop::upgrade(const std::string& requested) {
  const auto refused = refuse_upgrade();
  if (!refused.empty()) {
    spdlog::warn("upgrade refused: {}", refused);
    return {false, 0, refused};
  }
  const std::string binary = requested.empty() ? binary_ : requested;
  std::vector<PassedSocket> sockets;
  for (int fd : listeners_.fds()) sockets.push_back({fd, "listen"});
  if (admin_server_) sockets.push_back({admin_server_->listener_fd(), std::string(admin_fd_name)});
  if (state_file_) state_file_->write(*snapshot_);
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      config_->server.health_ready_timeout + std::chrono::seconds(10));
  const auto r = spawn_upgrade(binary, {"run", "--config", config_path_}, sockets,
                               state_text_now(*snapshot_), timeout);
  if (!r.ok) {
    spdlog::error("upgrade to {} failed: {}; this process keeps serving", binary, r.error);
    return {false, 0, r.error};
  }
  spdlog::info("upgrade: pid {} accepts; this process stops accepting and drains", r.pid);
  upgraded_to_ = r.pid;
  notifier_.main_pid(r.pid);
  state_file_.reset();  // the new process owns it from now on
  // After the admin answer is on its way: the upgrade request came on this process's listener.
  net::post(io_, [this] { hand_over(); });
  return {true, r.pid, ""};
}

// SIGTERM or SIGINT: readiness fails at once, the listeners keep accepting for shutdown_delay,
// then the drain. A second signal changes nothing: the deadline stands.
void ControlLoop::shut_down(int sig) {
  if (shutting_down_) return;
  shutting_down_ = true;
  ready_ = false;
  notifier_.stopping();
  const auto delay = config_->server.shutdown_delay;
  spdlog::info("signal {}: graceful shutdown (delay {}ms, timeout {}ms)", sig, delay.count(),
               config_->server.shutdown_timeout.count());
  if (delay.count() == 0) return stop_accepting();
  after(drain_timer_, delay, &ControlLoop::on_shutdown_delay);
}

void ControlLoop::on_shutdown_delay() { stop_accepting(); }

// What each signal does. SIGHUP, SIGUSR1 and SIGUSR2 leave the loop waiting for the next signal;
// SIGTERM and SIGINT shut down, after which no signal is awaited.
const ControlLoop::SignalAction ControlLoop::signal_actions[5] = {
    {SIGTERM, &ControlLoop::on_terminate, false},
    {SIGINT, &ControlLoop::on_terminate, false},
    {SIGHUP, &ControlLoop::on_hangup, true},
    {SIGUSR1, &ControlLoop::on_reopen_logs, true},  // nginx's convention, for logrotate
    {SIGUSR2, &ControlLoop::on_upgrade, true},
};

void ControlLoop::await_signal() {
  signals_.async_wait([this](boost::system::error_code ec, int sig) { on_signal(ec, sig); });
}

void ControlLoop::on_signal(boost::system::error_code ec, int sig) {
  if (ec) return;
  for (const auto& action : signal_actions) {
    if (action.signal != sig) continue;
    (this->*action.handle)(sig);
    if (action.again) await_signal();
    return;
  }
}

void ControlLoop::on_terminate(int sig) { shut_down(sig); }

void ControlLoop::on_hangup(int) { reload(true); }

void ControlLoop::on_reopen_logs(int) { reopen_logs("SIGUSR1"); }

void ControlLoop::on_upgrade(int) { upgrade(""); }

// Across workers: TLS listener handshakes completed and failed.
std::pair<std::uint64_t, std::uint64_t> ControlLoop::tls_handshakes() const {
  std::pair<std::uint64_t, std::uint64_t> n{0, 0};
  for (const auto& w : workers_) {
    n.first += w->tls_handshakes();
    n.second += w->tls_handshake_failures();
  }
  return n;
}

// Each worker counts on its own thread; a worker that does not answer within 200 ms (stopping,
// or stuck) makes the figure unknown rather than wrong.
std::optional<std::size_t> ControlLoop::upstream_connections() const {
  std::vector<std::future<std::size_t>> counts;
  for (const auto& w : workers_) counts.push_back(w->count_upstream_connections());
  std::size_t n = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (auto& c : counts) {
    if (c.wait_until(until) != std::future_status::ready) return std::nullopt;
    n += c.get();
  }
  return n;
}

// A drain set or lifted through the admin API: its consequences here, and the fleet told.
void ControlLoop::drained(const std::string& upstream, Endpoint& ep, bool drain) {
  note_drain(upstream, ep, drain, "admin API");
  if (fleet_) fleet_->drained_here(upstream, ep.identity(), drain);
}

// A drain set or lifted through another instance's admin API.
void ControlLoop::apply_fleet_drain(const std::string& upstream, Endpoint& ep, bool drain) {
  ep.set_draining(drain);
  ep.set_drained_by_api(drain);
  note_drain(upstream, ep, drain, "fleet");
}

// A drain change: logged, recorded, and a drained server's idle pooled connections closed.
void ControlLoop::note_drain(const std::string& upstream, Endpoint& ep, bool drain, std::string_view via) {
  spdlog::info("server {}: {} through the {}", ep.identity(), drain ? "draining" : "undrained", via);
  telemetry::events().push("drain", upstream, ep.identity(),
                           std::string(drain ? "draining (" : "undrained (") + std::string(via) + ")",
                           steady_clock().now());
  if (drain)
    for (auto& w : workers_) w->close_idle(ep);
}

// [fleet]: the drains the fleet holds are read before the listeners open, so that the first
// request already sees them; a Redis that does not answer within its deadline leaves this
// instance with its own drains (the fleet syncs when Redis answers).
void ControlLoop::start_fleet() {
  if (!config_->fleet.enabled) return;
  const auto name = config_->fleet.name.empty() ? default_fleet_name(*config_) : config_->fleet.name;
  fleet_ = std::make_unique<Fleet>(
      io_, config_->fleet, name, [this] { return snapshot_; },
      [this](const std::string& upstream, Endpoint& ep, bool drain) { apply_fleet_drain(upstream, ep, drain); },
      [this](const fleet::Verdict& v) {
        const auto latency = std::chrono::microseconds(v.latency_us);
        if (prober_) prober_->apply_verdict(v.upstream, v.server, {v.passed, v.detail, latency});
      });
  fleet_->start();
  const auto until = std::chrono::steady_clock::now() + 2 * Fleet::op_timeout;
  while (!fleet_->settled() && std::chrono::steady_clock::now() < until)
    if (io_.run_one_until(until) == 0) break;
  io_.restart();
}

std::size_t ControlLoop::client_connections() const {
  std::size_t n = 0;
  for (const auto& w : workers_) n += w->active_sessions();
  return n;
}

std::size_t ControlLoop::parked_connections() const {
  std::size_t n = 0;
  for (const auto& w : workers_) n += w->parked_connections();
  return n;
}

std::uint64_t ControlLoop::access_log_dropped() const { return access_log_->dropped(); }

// Logrotate's postrotate (SIGUSR1) or POST /api/logs/reopen: each file opened again by its path,
// between two lines. Returns what failed; a log that could not be reopened keeps its old file.
std::vector<std::string> ControlLoop::reopen_logs(std::string_view why) {
  std::vector<std::string> errors;
  for (LogSink* sink : {&access_log_->sink(), &error_log_sink()}) {
    auto error = sink->reopen();
    if (!error.empty()) errors.push_back(std::move(error));
  }
  // Logged after the reopen, so that the line lands in the new error file.
  for (const auto& e : errors) spdlog::error("log reopen: {}; still writing to the previous file", e);
  spdlog::info("logs reopened ({})", why);
  return errors;
}

// `job` now, then every period until shutdown starts (a tick at shutdown is the last).
void ControlLoop::every(Periodic& job) {
  (this->*job.tick)();
  if (shutting_down_) return;
  job.timer.expires_after(job.period);
  job.timer.async_wait([this, &job](boost::system::error_code ec) {
    if (!ec) every(job);
  });
}

void ControlLoop::after(net::steady_timer& timer, Clock::duration delay, void (ControlLoop::*then)()) {
  timer.expires_after(delay);
  timer.async_wait([this, then](boost::system::error_code ec) {
    if (!ec) (this->*then)();
  });
}

// Health clock: ends ejections (half-open) and steps slow-start ramps. Workers can eject a
// server at any moment, so every server is looked at on a short period rather than only at a
// deadline computed earlier.
void ControlLoop::on_health_tick() {
  for (const auto& u : snapshot_->upstreams)
    for (Endpoint* ep : u->endpoints())
      // next_deadline() is "now + one ramp step" while ramping: tick whenever there is work.
      if (ep->has_health() && ep->health().next_deadline() != Clock::time_point::max())
        if (auto t = ep->health().tick()) health::log_transition(u->name(), *ep, *t);
  if (state_file_) state_file_->update(*snapshot_);  // changes of the last 100 ms: one write
}

// The dashboard's history: one sample a second of the counters the workers keep anyway.
void ControlLoop::on_history_tick() {
  history_.sample(*snapshot_, static_cast<unsigned>(workers_.size()));
  // Each worker counts its own pool on its thread and hands the count back to this one.
  for (std::size_t i = 0; i < workers_.size(); ++i)
    workers_[i]->count_pooled([this, i](std::vector<std::uint32_t> counts) {
      net::post(io_, [this, i, counts = std::move(counts)]() mutable {
        history_.set_pooled(i, std::move(counts));
      });
    });
}

}  // namespace sluice
