#include "sluice/runtime/runtime.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "sluice/config/loader.hpp"
#include "sluice/config/units.hpp"
#include "sluice/discovery/discovery.hpp"
#include "sluice/health/log.hpp"
#include "sluice/admin/server.hpp"
#include "sluice/health/prober.hpp"
#include "sluice/runtime/config_watch.hpp"
#include "sluice/runtime/control.hpp"
#include "sluice/runtime/diff.hpp"
#include "sluice/runtime/fd_budget.hpp"
#include "sluice/runtime/listen_fds.hpp"
#include "sluice/runtime/listeners.hpp"
#include "sluice/runtime/reload_watch.hpp"
#include "sluice/runtime/state_file.hpp"
#include "sluice/runtime/systemd.hpp"
#include "sluice/runtime/upgrade.hpp"
#include "sluice/runtime/worker.hpp"
#include "sluice/telemetry/event_ring.hpp"
#include "sluice/telemetry/log_sink.hpp"
#include "sluice/upstream/upstream.hpp"

namespace sluice {

namespace net = boost::asio;

struct Runtime::State {
  std::string config_path;
  std::shared_ptr<const config::Config> config;
  EndpointDirectory directory{steady_clock()};
  std::shared_ptr<const Snapshot> snapshot;
  std::uint64_t version = 0;
  std::unique_ptr<AccessLog> access_log;
  std::vector<std::unique_ptr<Worker>> workers;
  net::io_context control;
  Listeners listeners;
  RuntimeControl* control_api = nullptr;  // what the admin listener serves (lives in run())
  std::unique_ptr<admin::Server> admin_server;
  std::unique_ptr<ConfigWatch> watch;
  std::unique_ptr<health::Prober> prober;
  std::vector<std::string> probed_upstreams;
  bool shutting_down = false;
  bool ready = false;  // /readyz: listeners open, no SIGTERM yet
  Clock::time_point loaded_at;
  std::uint64_t reloads_ok = 0;
  std::uint64_t reloads_failed = 0;
  std::atomic<bool> shutdown_flag{false};  // read by every worker
  History history;                         // the dashboard's per-second samples
  ServiceNotifier notifier{control};
  std::unique_ptr<StateFile> state_file;  // [server] state_file; restart-only
  bool notified_ready = false;  // READY=1 sent (reload notifications only after it)
  pid_t upgraded_to = 0;  // the new process a binary upgrade handed the listeners to
  std::string binary = own_binary();  // what SIGUSR2 starts again
  // Servers from DNS; made when a config first asks for them ([dns] is restart-only). Declared
  // after `control`, so destroyed before it.
  std::unique_ptr<discovery::Discovery> discovery;
  bool membership_pending = false;  // a rebuild for DNS changes is posted
  // The watch after a reload ([reload], runtime/reload_watch.hpp).
  ReloadWatch reload_watch{steady_clock()};
  TrafficMeter traffic;
  std::shared_ptr<const config::Config> watched_previous;  // what a rollback restores
  std::string watched_fingerprint;                         // the file being watched
  std::uint64_t watched_version = 0;
  std::string watch_state = "none";  // none, watching, applied, rolled_back, unwatched
  std::string verdict;               // the last verdict, as logged
  struct RolledBack {
    std::uint64_t version = 0;
    std::string verdict;
  };
  std::map<std::string, RolledBack> rolled_back;  // by config_fingerprint: refused unless --no-watch
  std::uint64_t rollbacks = 0;
  std::string status_note;  // systemd's STATUS= after a rollback, until the next reload
  // The control loop's signals and timers; declared after `control`, so destroyed before it.
  net::signal_set signals{control};
  net::steady_timer ready_timer{control};    // health_ready_timeout
  net::steady_timer health_timer{control};   // the health clock, every 100 ms
  net::steady_timer history_timer{control};  // the dashboard's samples, every second
  net::steady_timer watch_timer{control};    // the reload watch's count, every 500 ms
  net::steady_timer drain_timer{control};    // shutdown_delay, then the drain's polls
  Clock::time_point drain_deadline{};        // shutdown_timeout's end
};

Runtime::Runtime(config::Config config, std::string config_path) : state_(std::make_unique<State>()) {
  state_->config_path = std::move(config_path);
  state_->config = std::make_shared<const config::Config>(std::move(config));
}

Runtime::~Runtime() = default;

namespace {

// Each worker's share of server.max_connections, clamped to what the descriptors can hold, so
// that the limit is met at accept time (the excess waits in the backlog) and never mid-request
// (EMFILE on an upstream connect would turn into a 502 for a client already accepted).
std::uint32_t connections_per_worker(const config::Config& cfg, unsigned workers) {
  const auto fd_limit = raise_fd_limit();
  const auto reserved = fd_reserve + max_idle_pooled(cfg, workers);
  const auto max_connections = connections_within(fd_limit, reserved, cfg.server.max_connections);
  if (max_connections < cfg.server.max_connections) {
    // The default is a ceiling that the fd limit may lower without anyone having asked for more:
    // that is said at info. A value the operator wrote that cannot be honoured is a warning.
    const bool is_default = cfg.server.max_connections == config::ServerSection{}.max_connections;
    spdlog::log(is_default ? spdlog::level::info : spdlog::level::warn,
                "max_connections {} needs about {} file descriptors, the limit is {}: accepting at "
                "most {} connections (raise `ulimit -n` to allow more)",
                cfg.server.max_connections, 2ULL * cfg.server.max_connections + reserved, fd_limit,
                max_connections);
  }
  return (max_connections + workers - 1) / workers;
}

// The admin listener of `admin`, bound and serving, with its token read; at start-up it may take
// the socket a binary upgrade passed (`inherited_fd`, owned by it from now on) instead of
// binding. Throws (bind, token) std::runtime_error naming what failed.
std::unique_ptr<admin::Server> open_admin(Runtime::State& s, const config::AdminSection& admin,
                                          int inherited_fd = -1) {
  const auto token = admin.token_file.empty() ? std::string() : admin::read_token_file(admin.token_file);
  auto server = std::make_unique<admin::Server>(s.control, admin.listen, *s.control_api, token);
  server->set_allowed_hosts(admin.allowed_hosts);
  server->start(inherited_fd);
  spdlog::info("admin listening on {}:{}", admin.listen.host, server->local_port());
  return server;
}

// The old admin listener after a reload moved it: the reload was probably asked through it, and
// its answer is still being written, so it closes a moment later instead of now.
void retire_admin(Runtime::State& s, std::unique_ptr<admin::Server> old) {
  if (!old) return;
  auto timer = std::make_shared<net::steady_timer>(s.control, std::chrono::seconds(1));
  std::shared_ptr<admin::Server> server(std::move(old));
  timer->async_wait([timer, server](boost::system::error_code) { server->stop(); });
}

// What a reload does to the admin listener: a new one when it appears or moves (bound before the
// reload commits, so that a busy port fails the reload), else the token re-read (rotation).
struct AdminChange {
  bool moved = false;
  std::unique_ptr<admin::Server> server;  // the new listener, when moved and enabled
  std::string token;
  std::vector<std::string> allowed_hosts;
};

AdminChange prepare_admin(Runtime::State& s, const config::AdminSection& now) {
  const auto& was = s.config->admin;
  AdminChange change;
  change.moved = now.enabled != was.enabled || now.listen.to_string() != was.listen.to_string();
  if (change.moved && now.enabled) change.server = open_admin(s, now);
  else if (now.enabled && !now.token_file.empty()) change.token = admin::read_token_file(now.token_file);
  change.allowed_hosts = now.allowed_hosts;
  return change;
}

void commit_admin(Runtime::State& s, AdminChange change) {
  if (!change.moved) {
    if (s.admin_server) {
      s.admin_server->set_token(std::move(change.token));
      s.admin_server->set_allowed_hosts(std::move(change.allowed_hosts));
    }
    return;
  }
  if (s.admin_server) spdlog::info("admin: stopped listening on {}", s.config->admin.listen.to_string());
  retire_admin(s, std::move(s.admin_server));
  s.admin_server = std::move(change.server);
}

// `[server] watch_config` on, or off; a watch that stops may be the one whose event runs this
// reload, so it is destroyed after the reload returns.
void apply_watch(Runtime::State& s, bool watch);

// [log] access_file / error_file as a reload changes them: the new files are opened before the
// reload commits, so that one that cannot be opened fails it and nothing changes.
struct LogFiles {
  std::optional<int> access, error;  // set when the path changes: the new descriptor (-1 = stdio)
};

LogFiles open_log_files(const config::LogSection& was, const config::LogSection& now) {
  LogFiles files;
  const auto open = [](std::string_view key, const std::string& path) {
    try {
      return LogSink::open(path);
    } catch (const std::exception& e) {
      throw std::runtime_error("log." + std::string(key) + ": " + e.what());
    }
  };
  if (now.access_file != was.access_file) files.access = open("access_file", now.access_file);
  try {
    if (now.error_file != was.error_file) files.error = open("error_file", now.error_file);
  } catch (...) {
    if (files.access && *files.access >= 0) ::close(*files.access);
    throw;
  }
  return files;
}

// Logrotate's postrotate (SIGUSR1) or POST /api/logs/reopen: each file opened again by its path,
// between two lines. Returns what failed; a log that could not be reopened keeps its old file.
std::vector<std::string> reopen_logs(Runtime::State& s, std::string_view why) {
  std::vector<std::string> errors;
  for (LogSink* sink : {&s.access_log->sink(), &error_log_sink()}) {
    auto error = sink->reopen();
    if (!error.empty()) errors.push_back(std::move(error));
  }
  // Logged after the reopen, so that the line lands in the new error file.
  for (const auto& e : errors) spdlog::error("log reopen: {}; still writing to the previous file", e);
  spdlog::info("logs reopened ({})", why);
  return errors;
}

// [log] level, access, error_format and the files: applied to the loggers at once, each change
// logged.
void apply_logging(Runtime::State& s, const config::LogSection& was, const config::LogSection& now,
                   LogFiles files) {
  if (files.access) {
    s.access_log->sink().adopt(*files.access, now.access_file);
    spdlog::info("access log file {} -> {}", was.access_file.empty() ? "stdout" : was.access_file,
                 now.access_file.empty() ? "stdout" : now.access_file);
  }
  if (files.error) {
    spdlog::info("error log file {} -> {}", was.error_file.empty() ? "stderr" : was.error_file,
                 now.error_file.empty() ? "stderr" : now.error_file);
    error_log_sink().adopt(*files.error, now.error_file);
  }
  if (now.error_format != was.error_format) set_error_format(now.error_format);
  if (now.level != was.level) {
    spdlog::default_logger()->set_level(spdlog_level(now.level));
    spdlog::info("log level {} -> {}", config::name_of(was.level), config::name_of(now.level));
  }
  if (now.access != was.access) {
    s.access_log->set_format(now.access);
    spdlog::info("access log {} -> {}", access_format_name(was.access), access_format_name(now.access));
  }
}

// Points the prober at the snapshot's servers: one prober per server, on this (control) thread.
void update_probes(Runtime::State& s) {
  std::vector<std::string> probed;
  for (const auto& u : s.snapshot->upstreams) {
    if (!u->config().health) continue;
    std::vector<health::ProbeTarget> targets;
    for (const auto& ep : u->shared_endpoints())
      targets.push_back({ep, &ep->health(), u->name(), ep->tls() ? u->shared_tls_context() : nullptr,
                         u->tls_server_name(*ep)});
    s.prober->set_upstream(u->name(), *u->config().health, std::move(targets));
    probed.push_back(u->name());
  }
  for (const auto& name : s.probed_upstreams)
    if (std::find(probed.begin(), probed.end(), name) == probed.end()) s.prober->remove_upstream(name);
  s.probed_upstreams = std::move(probed);
}

// systemd's STATUS= line: what `systemctl status` shows.
std::string status_line(const Runtime::State& s) {
  std::size_t up = 0;
  std::size_t total = 0;
  for (const auto& u : s.snapshot->upstreams)
    for (const Endpoint* ep : u->endpoints()) {
      ++total;
      up += ep->available() ? 1 : 0;
    }
  return "config version " + std::to_string(s.version) + ", " + std::to_string(up) + "/" +
         std::to_string(total) + " servers up" + (s.status_note.empty() ? "" : "; " + s.status_note);
}

// True once every health-checked server has had its first probe: before that a server that is
// down still counts as up, and a service manager told "ready" would send traffic to it.
bool first_probe_round_done(const Runtime::State& s) {
  for (const auto& u : s.snapshot->upstreams) {
    if (!u->config().health) continue;
    for (const Endpoint* ep : u->endpoints())
      if (ep->probes_passed.load(std::memory_order_relaxed) +
              ep->probes_failed.load(std::memory_order_relaxed) ==
          0)
        return false;
  }
  return true;
}

void notify_ready(Runtime::State& s, std::string_view why) {
  if (s.notified_ready || s.shutting_down) return;
  s.notified_ready = true;
  spdlog::info("ready ({})", why);
  s.notifier.ready(status_line(s));
  report_upgrade_ready();  // a binary upgrade's old process may stop accepting now
}

// The snapshot of `cfg` with the servers DNS gives now (discovery/): the directory keeps the
// state of every endpoint whose identity stays, for a reload and a DNS change alike.
std::shared_ptr<const Snapshot> build(Runtime::State& s, const std::shared_ptr<const config::Config>& cfg,
                                      std::uint64_t version) {
  // The snapshot being replaced hands each kept route its rate limiter (proxy/admission).
  return build_snapshot(s.discovery ? s.discovery->expand(cfg) : cfg, s.directory, version,
                        s.snapshot.get());
}

// Endpoints of `old` that `now` does not have (removed from the file or gone from DNS): no new
// request, not even a retry from a request that started on `old`; in-flight ones finish; idle
// pooled connections close.
void retire_removed(Runtime::State& s, const Snapshot& old, const Snapshot& now) {
  for (const auto& u : old.upstreams)
    for (const auto& ep : u->shared_endpoints()) {
      bool kept = false;
      for (const auto& n : now.upstreams)
        for (const Endpoint* e : n->endpoints()) kept |= e == ep.get();
      if (kept) continue;
      ep->set_draining(true);
      for (auto& w : s.workers) w->close_idle(ep);
    }
}

// Makes `snapshot` the one every new request and probe uses.
void publish(Runtime::State& s, std::shared_ptr<const Snapshot> snapshot) {
  const auto old = std::exchange(s.snapshot, snapshot);
  // Removed servers are retired once every worker has switched: a request that starts on the old
  // snapshot meanwhile would find all of its servers draining and be answered 503 (a reload that
  // swaps a DNS name for another did, under ASan: integration/test_discovery.py).
  const auto retire = [&s, old, snapshot] {
    if (old) retire_removed(s, *old, *snapshot);
  };
  if (s.workers.empty()) {
    retire();
  } else {
    auto left = std::make_shared<std::atomic<std::size_t>>(s.workers.size());
    auto all = std::make_shared<std::promise<void>>();
    auto switched = all->get_future();
    for (auto& w : s.workers) {
      w->publish(snapshot, [left, all, &s, retire] {
        if (left->fetch_sub(1, std::memory_order_acq_rel) != 1) return;
        all->set_value();
        net::post(s.control, retire);
      });
    }
    // The reload's answer says which version is now serving, so it waits (briefly: each worker
    // takes the snapshot from its mailbox between two events) until every worker has switched.
    // Without the wait a request sent right after the answer could find its worker still on the
    // old snapshot, and under load did (integration/test_edge_rules.py). Bounded, as the
    // upstream-connection count's wait is: a worker that no longer runs its loop (shutting down)
    // must not hold the control thread.
    if (switched.wait_for(std::chrono::seconds(1)) != std::future_status::ready)
      spdlog::warn("config version {}: {} of {} workers had not switched to it after 1 s", snapshot->version,
                   left->load(std::memory_order_acquire), s.workers.size());
  }
  update_probes(s);
}

// DNS changed the membership of an upstream: the running config is built again, like a reload
// that keeps the file (one rebuild for the changes of one burst of answers).
void apply_membership(Runtime::State& s) {
  s.membership_pending = false;
  if (s.shutting_down) return;
  try {
    publish(s, build(s, s.config, s.version + 1));
    s.version += 1;
  } catch (const std::exception& e) {
    spdlog::error("applying DNS changes failed: {}; the previous servers keep serving", e.what());
  }
}

// Starts following the DNS names of `cfg` (at start-up and at reloads).
void follow_dns(Runtime::State& s, const config::Config& cfg) {
  bool wanted = false;
  for (const auto& u : cfg.upstreams) wanted |= u.discovers();
  if (!wanted && !s.discovery) return;
  if (!s.discovery) {
    s.discovery = std::make_unique<discovery::Discovery>(s.control, steady_clock(), cfg.dns);
    s.discovery->on_change = [&s](const std::string& upstream, const std::string& name,
                                  const discovery::Change&) {
      telemetry::events().push("dns", upstream, name, "membership changed", steady_clock().now());
      if (s.membership_pending) return;
      s.membership_pending = true;
      net::post(s.control, [&s] { apply_membership(s); });
    };
  }
  s.discovery->configure(cfg);
}

// At start-up, before anything listens: the first answers, so that the first snapshot has the
// servers (bounded by what the resolver may take: SRV, then its targets).
void await_first_answers(Runtime::State& s) {
  if (!s.discovery) return;
  const auto& dns = s.config->dns;
  const auto bound = 2 * dns.timeout * dns.attempts + std::chrono::seconds(1);
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!s.discovery->settled() && std::chrono::steady_clock::now() < until)
    if (s.control.run_one_until(until) == 0) break;
  s.control.restart();
  for (const auto& f : s.discovery->failures())
    spdlog::warn("upstream {}; no servers from it yet, resolving again", f);
}

// Parse, validate, bind what is new, build, publish: all or nothing. Requests in flight keep
// their snapshot; a key that needs a restart refuses the whole file. `watched`: the reload is
// watched ([reload] watch) and a file rolled back before is refused.
admin::ReloadOutcome reload_config(Runtime::State& s, bool watched);

// A reload as systemd sees it: RELOADING=1, then READY=1 whatever the outcome (a rejected
// config leaves the previous one serving, which is ready).
admin::ReloadOutcome reload(Runtime::State& s, bool watched = true) {
  if (s.notified_ready) s.notifier.reloading();
  auto out = reload_config(s, watched);
  if (s.notified_ready) s.notifier.ready(status_line(s));
  return out;
}

// Bind what is new, build, publish `cfg`: all or nothing (throws, and nothing changed). The one
// way a config starts serving after start-up: a reload of the file, and a rollback to the
// config a watched reload replaced, so that both keep the servers' state alike (drains,
// health, ejections, pooled connections: the directory keeps endpoints by identity).
void apply_config(Runtime::State& s, const std::shared_ptr<const config::Config>& cfg) {
  try {
    // Everything that can fail comes before the first change: new sockets are bound (and closed
    // again if a later step throws), the snapshot is built.
    const auto wanted = Listeners::of(*cfg);
    auto pending = s.listeners.bind_new(s.control, wanted, s.workers.size());
    auto admin_change = prepare_admin(s, cfg->admin);
    // Names that stay keep their answers; new ones are resolved now and join when they answer.
    follow_dns(s, *cfg);
    auto snapshot = build(s, cfg, s.version + 1);
    auto log_files = open_log_files(s.config->log, cfg->log);  // last: nothing throws after it
    const auto was = s.config;
    s.version += 1;
    s.config = cfg;
    s.loaded_at = steady_clock().now();
    publish(s, snapshot);
    s.listeners.apply(std::move(pending), wanted, s.workers);
    s.listeners.set_defer_accept(cfg->server.defer_accept);  // the open sockets, new ones too
    commit_admin(s, std::move(admin_change));
    apply_logging(s, was->log, cfg->log, log_files);
    if (cfg->server.watch_config != was->server.watch_config) apply_watch(s, cfg->server.watch_config);
    if (cfg->server.max_connections != was->server.max_connections) {
      const auto per_worker = connections_per_worker(*cfg, static_cast<unsigned>(s.workers.size()));
      for (auto& w : s.workers) w->set_max_connections(per_worker);
    }
    if (s.discovery) s.discovery->prune();  // names the new file no longer has
  } catch (...) {
    if (s.discovery) {  // back to the running config's names, with their servers
      s.discovery->configure(*s.config);
      s.discovery->prune();
    }
    throw;
  }
}

// The running count of answers, as the watch keeps it (each tick, and just before a reload).
void record_traffic(Runtime::State& s) {
  s.reload_watch.record(s.traffic.read(*s.snapshot, static_cast<unsigned>(s.workers.size())),
                        s.config->reload.watch);
}

// After a reload applied: watch it, unless it asked not to be or [reload] watch is 0.
void start_watch(Runtime::State& s, std::shared_ptr<const config::Config> previous,
                 std::string fingerprint, std::vector<UpstreamUp> up_before, bool watched,
                 admin::ReloadOutcome& out) {
  s.reload_watch.cancel();  // a reload during a watch: the newer one is watched against it
  s.watched_previous.reset();
  s.status_note.clear();
  s.watched_version = s.version;
  const auto watch = s.config->reload.watch;
  // The same text as before changes nothing a watch could blame (a SIGHUP of an unchanged file).
  const bool unchanged = previous->text == s.config->text;
  if (!watched || watch.count() == 0 || unchanged) {
    s.rolled_back.erase(fingerprint);  // applied on purpose: no longer refused
    s.watch_state = "unwatched";
    s.verdict = !watched    ? "applied (not watched: --no-watch)"
                : unchanged ? "applied (not watched: the file did not change)"
                            : "applied (not watched: reload.watch is 0s)";
    return;
  }
  s.reload_watch.begin(s.config->reload, std::move(up_before));
  s.watched_previous = std::move(previous);
  s.watched_fingerprint = std::move(fingerprint);
  s.watch_state = "watching";
  s.verdict.clear();
  out.watch_ms = static_cast<unsigned long long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(watch).count());
  spdlog::info("config version {}: watching its traffic for {}", s.version, config::format_duration(watch));
}

admin::ReloadOutcome reload_config(Runtime::State& s, bool watched) {
  admin::ReloadOutcome out;
  auto result = config::load_file(s.config_path);
  if (result.ok()) result.errors = restart_changes(*s.config, *result.config);
  const auto fingerprint = result.ok() ? config_fingerprint(result.config->text) : std::string();
  if (const auto it = s.rolled_back.find(fingerprint);
      result.errors.empty() && watched && it != s.rolled_back.end()) {
    result.errors.push_back(
        {s.config_path, 0, 0, "",
         "this file was rolled back before (config version " + std::to_string(it->second.version) +
             ", " + it->second.verdict + ") and is unchanged since; fix it, or apply it anyway "
             "with `sluice reload --no-watch`"});
  }
  if (!result.errors.empty()) {
    for (const auto& e : result.errors) {
      spdlog::error("reload rejected: {}", e.to_string());
      out.errors.push_back(e.to_string());
    }
    spdlog::error("reload of {} failed: {} error(s); the previous configuration keeps serving",
                  s.config_path, result.errors.size());
    ++s.reloads_failed;
    out.version = s.version;
    telemetry::events().push("reload", "", "", "failed: " + out.errors.front(), steady_clock().now());
    return out;
  }
  for (const auto& w : result.warnings) spdlog::warn("reload: {}", w.to_string());
  try {
    auto cfg = std::make_shared<const config::Config>(std::move(*result.config));
    auto previous = s.config;
    auto up_before = servers_up(*s.snapshot);
    record_traffic(s);  // the window before ends here
    apply_config(s, cfg);
    ++s.reloads_ok;
    spdlog::info("reloaded {} (config version {})", s.config_path, s.version);
    telemetry::events().push("reload", "", "", "config version " + std::to_string(s.version),
                             steady_clock().now());
    out.ok = true;
    start_watch(s, std::move(previous), fingerprint, std::move(up_before), watched, out);
  } catch (const std::exception& e) {
    spdlog::error("reload of {} failed: {}; the previous configuration keeps serving", s.config_path,
                  e.what());
    out.errors.push_back(s.config_path + ": " + e.what());
    ++s.reloads_failed;
    telemetry::events().push("reload", "", "", "failed: " + out.errors.back(), steady_clock().now());
  }
  out.version = s.version;
  return out;
}

// A watched reload breached: the config it replaced serves again, applied like any reload, and
// the file's version is refused until it changes (or `--no-watch`).
void roll_back(Runtime::State& s, const WatchVerdict& verdict) {
  const auto bad = s.watched_version;
  spdlog::error("config version {} {}; restoring the previous configuration", bad, verdict.text);
  if (s.notified_ready) s.notifier.reloading();
  s.rolled_back[s.watched_fingerprint] = {bad, verdict.text};
  try {
    apply_config(s, s.watched_previous);
    ++s.rollbacks;
    s.watch_state = "rolled_back";
    s.status_note = "config version " + std::to_string(bad) + " " + verdict.text;
    spdlog::error("config version {} restored the configuration before version {}; {} stays refused "
                  "until it changes (or `sluice reload --no-watch`)", s.version, bad, s.config_path);
    telemetry::events().push("reload", "", "",
                             "config version " + std::to_string(bad) + " " + verdict.text +
                                 "; previous config restored as version " + std::to_string(s.version),
                             steady_clock().now());
  } catch (const std::exception& e) {
    s.watch_state = "rollback_failed";
    s.status_note = "config version " + std::to_string(bad) + ": rollback failed";
    spdlog::error("rollback of config version {} failed: {}; it keeps serving", bad, e.what());
    telemetry::events().push("reload", "", "", "rollback failed: " + std::string(e.what()),
                             steady_clock().now());
  }
  s.watched_previous.reset();
  if (s.notified_ready) s.notifier.ready(status_line(s));
}

// The watch's tick (control thread timer): the count, then a verdict when one is due.
void watch_tick(Runtime::State& s) {
  record_traffic(s);
  if (!s.reload_watch.watching()) return;
  const auto verdict = s.reload_watch.judge(servers_up(*s.snapshot));
  if (!verdict) return;
  s.verdict = verdict->text;
  if (verdict->kind == WatchVerdict::Kind::rolled_back) return roll_back(s, *verdict);
  s.watch_state = "applied";
  s.watched_previous.reset();
  spdlog::info("config version {} {}", s.watched_version, verdict->text);
  telemetry::events().push("reload", "", "",
                           "config version " + std::to_string(s.watched_version) + " " + verdict->text,
                           steady_clock().now());
}

// /api/status's "reload": the last reload's watch and the files a rollback refuses.
boost::json::object reload_watch_status(const Runtime::State& s) {
  boost::json::object o;
  o["watch_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(s.config->reload.watch).count();
  o["version"] = s.watched_version;
  o["state"] = s.watch_state;
  o["verdict"] = s.verdict;
  boost::json::array refused;
  for (const auto& [fingerprint, r] : s.rolled_back)
    refused.push_back({{"fingerprint", fingerprint}, {"version", r.version}, {"verdict", r.verdict}});
  o["rolled_back"] = std::move(refused);
  return o;
}

void apply_watch(Runtime::State& s, bool watch) {
  if (watch && !s.watch) {
    try {
      s.watch = std::make_unique<ConfigWatch>(s.control, s.config_path, [&s] { reload(s); });
      spdlog::info("watching {} for changes", s.config_path);
    } catch (const std::exception& e) {
      // The rest of the reload is applied; SIGHUP and the API still reload.
      spdlog::error("watch_config: {}", e.what());
    }
  } else if (!watch && s.watch) {
    s.watch->stop();
    std::shared_ptr<ConfigWatch> old(std::move(s.watch));
    net::post(s.control, [old] {});
    spdlog::info("no longer watching {}", s.config_path);
  }
}

// The access log, the first answers from DNS and the first snapshot; false (logged) when one of
// them fails and sluice must not start.
bool build_first_snapshot(Runtime::State& s) {
  try {
    s.access_log = std::make_unique<AccessLog>(s.config->log);
  } catch (const std::exception& e) {
    spdlog::error("log.access_file: {}", e.what());
    return false;
  }
  try {
    follow_dns(s, *s.config);
    await_first_answers(s);
    s.snapshot = build(s, s.config, ++s.version);
  } catch (const std::exception& e) {
    spdlog::error("{}: {}", s.config_path, e.what());
    return false;
  }
  return true;
}

// Before any request or probe: a server drained or down in the process this one replaces (a
// binary upgrade hands its state over), else at the last stop (the state file), starts that way.
void restore_server_state(Runtime::State& s) {
  const auto& path = s.config->server.state_file;
  if (!path.empty()) s.state_file = std::make_unique<StateFile>(path);
  if (const auto handed = take_upgrade_state())
    restore_state_text(*handed, *s.snapshot, "the process this one replaces");
  else if (s.state_file)
    s.state_file->restore(*s.snapshot);
}

void make_workers(Runtime::State& s) {
  const unsigned n = s.config->server.worker_count();
  const std::uint32_t per_worker = connections_per_worker(*s.config, n);
  for (unsigned i = 0; i < n; ++i)
    s.workers.push_back(std::make_unique<Worker>(i, steady_clock(), *s.access_log, s.snapshot, per_worker,
                                                 s.shutdown_flag));
}

// Every worker gets its own SO_REUSEPORT socket per address, so the kernel spreads connections.
// A socket inherited from systemd or from the process we replace (listen_fds.hpp) is taken
// instead of bound: a binary upgrade passes every old worker's socket, each keeping its accept
// queue (Listeners::bind_new). False (logged) when an address cannot be had.
bool open_listeners(Runtime::State& s, InheritedListeners& inherited) {
  try {
    const auto wanted = Listeners::of(*s.config);
    s.listeners.set_defer_accept(s.config->server.defer_accept);
    s.listeners.apply(s.listeners.bind_new(s.control, wanted, s.workers.size(), &inherited), wanted,
                      s.workers);
    inherited.close_unused();
  } catch (const ListenError& e) {
    spdlog::error("{}", e.what());
    return false;
  }
  return true;
}

// The admin listener at start-up, on the socket an upgrade passed (`admin_fd`) if there is one;
// a passed socket that no [admin] wants any more is closed. False (logged) when it cannot open.
bool open_first_admin(Runtime::State& s, std::optional<int> admin_fd) {
  if (s.config->admin.enabled) {
    try {
      s.admin_server = open_admin(s, s.config->admin, admin_fd.value_or(-1));
      admin_fd.reset();
    } catch (const std::exception& e) {
      spdlog::error("admin: {}", e.what());
      return false;
    }
  }
  if (admin_fd) ::close(*admin_fd);
  return true;
}

// Every timer and listener of the control loop stopped: once the workers are, nothing is left
// for it to run and Runtime::run() returns.
void stop_control_loop(Runtime::State& s) {
  s.signals.cancel();
  s.health_timer.cancel();
  s.history_timer.cancel();
  s.watch_timer.cancel();
  s.ready_timer.cancel();
  s.notifier.stop_watchdog();
  s.prober->stop();
  if (s.discovery) s.discovery->stop();
  if (s.admin_server) s.admin_server->stop();
  if (s.watch) s.watch->stop();
}

// The drain's poll: the workers stop when their last connection closed or shutdown_timeout
// passed, whichever comes first.
void poll_drained(Runtime::State& s) {
  std::size_t active = 0;
  for (auto& w : s.workers) active += w->active_sessions();
  if (active == 0 || steady_clock().now() >= s.drain_deadline) {
    if (active != 0) spdlog::warn("shutdown timeout: closing {} connection(s)", active);
    for (auto& w : s.workers) w->stop();
    stop_control_loop(s);
    return;
  }
  s.drain_timer.expires_after(std::chrono::milliseconds(20));
  s.drain_timer.async_wait([&s](boost::system::error_code) { poll_drained(s); });
}

// Stop accepting; in-flight requests get shutdown_timeout; then run() returns.
void stop_accepting(Runtime::State& s) {
  // Logged so that the end of shutdown_delay is observable on sluice's own clock.
  spdlog::info("shutdown: no longer accepting connections");
  s.drain_deadline = steady_clock().now() + s.config->server.shutdown_timeout;
  s.shutdown_flag.store(true, std::memory_order_relaxed);
  for (auto& w : s.workers) w->begin_shutdown();
  poll_drained(s);
}

// The new process of a binary upgrade accepts: this one stops at once (no shutdown_delay) and
// drains; the new one answers the admin API from now on.
void hand_over(Runtime::State& s) {
  s.shutting_down = true;
  s.ready = false;
  if (s.admin_server) s.admin_server->stop_accepting();
  stop_accepting(s);
}

// Why an upgrade cannot start now (empty: it can). One process upgrades at a time, and only once
// it serves: `systemctl kill -s USR2` signals every process of the unit, the new one of an upgrade
// under way too, which would otherwise start a third while the first waits for it.
std::string refuse_upgrade(const Runtime::State& s) {
  if (s.upgraded_to != 0) return fmt::format("this process already handed over to pid {}", s.upgraded_to);
  if (s.shutting_down) return "this process is shutting down";
  if (!s.notified_ready) return "this process is still starting (it can upgrade once it is ready)";
  return {};
}

// Binary upgrade (POST /api/upgrade, SIGUSR2): the new process gets every listening socket
// (admin included) and the servers' state as of now (drains, verdicts, ejections, ramps; the
// state file is written too); once it accepts, this one stops accepting and drains like at
// SIGTERM. Until then, and if it fails, this one serves as before.
admin::UpgradeOutcome upgrade_binary(Runtime::State& s, const std::string& requested) {
  const auto refused = refuse_upgrade(s);
  if (!refused.empty()) {
    spdlog::warn("upgrade refused: {}", refused);
    return {false, 0, refused};
  }
  const std::string binary = requested.empty() ? s.binary : requested;
  std::vector<PassedSocket> sockets;
  for (int fd : s.listeners.fds()) sockets.push_back({fd, "listen"});
  if (s.admin_server) sockets.push_back({s.admin_server->listener_fd(), std::string(admin_fd_name)});
  if (s.state_file) s.state_file->write(*s.snapshot);
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      s.config->server.health_ready_timeout + std::chrono::seconds(10));
  const auto r = spawn_upgrade(binary, {"run", "--config", s.config_path}, sockets,
                               state_text_now(*s.snapshot), timeout);
  if (!r.ok) {
    spdlog::error("upgrade to {} failed: {}; this process keeps serving", binary, r.error);
    return {false, 0, r.error};
  }
  spdlog::info("upgrade: pid {} accepts; this process stops accepting and drains", r.pid);
  s.upgraded_to = r.pid;
  s.notifier.main_pid(r.pid);
  s.state_file.reset();  // the new process owns it from now on
  // After the admin answer is on its way: the upgrade request came on this process's listener.
  net::post(s.control, [&s] { hand_over(s); });
  return {true, r.pid, ""};
}

// SIGTERM or SIGINT: readiness fails at once, the listeners keep accepting for shutdown_delay,
// then the drain. A second signal changes nothing: the deadline stands.
void begin_shutdown(Runtime::State& s, int sig) {
  if (s.shutting_down) return;
  s.shutting_down = true;
  s.ready = false;
  s.notifier.stopping();
  const auto delay = s.config->server.shutdown_delay;
  spdlog::info("signal {}: graceful shutdown (delay {}ms, timeout {}ms)", sig, delay.count(),
               s.config->server.shutdown_timeout.count());
  if (delay.count() == 0) {
    stop_accepting(s);
  } else {
    s.drain_timer.expires_after(delay);
    s.drain_timer.async_wait([&s](boost::system::error_code) { stop_accepting(s); });
  }
}

// SIGHUP reloads, SIGUSR1 reopens the logs, SIGUSR2 upgrades the binary; and the handler stays.
// SIGTERM and SIGINT shut down, after which no signal is awaited.
void await_signal(Runtime::State& s) {
  s.signals.async_wait([&s](boost::system::error_code ec, int sig) {
    if (ec) return;
    if (sig == SIGTERM || sig == SIGINT) return begin_shutdown(s, sig);
    if (sig == SIGHUP) reload(s);
    else if (sig == SIGUSR1) reopen_logs(s, "SIGUSR1");
    else upgrade_binary(s, "");
    await_signal(s);
  });
}

// Across workers: TLS listener handshakes completed and failed.
std::pair<std::uint64_t, std::uint64_t> tls_handshakes(const Runtime::State& s) {
  std::pair<std::uint64_t, std::uint64_t> n{0, 0};
  for (const auto& w : s.workers) {
    n.first += w->tls_handshakes();
    n.second += w->tls_handshake_failures();
  }
  return n;
}

// Each worker counts on its own thread; a worker that does not answer within 200 ms (stopping,
// or stuck) makes the figure unknown rather than wrong.
std::optional<std::size_t> upstream_connections(const Runtime::State& s) {
  std::vector<std::future<std::size_t>> counts;
  for (const auto& w : s.workers) counts.push_back(w->count_upstream_connections());
  std::size_t n = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (auto& c : counts) {
    if (c.wait_until(until) != std::future_status::ready) return std::nullopt;
    n += c.get();
  }
  return n;
}

// A drain set or lifted through the admin API: logged, recorded, and a drained server's idle
// pooled connections closed.
void drained_by_api(Runtime::State& s, const std::string& upstream, Endpoint& ep, bool drain) {
  spdlog::info("server {}: {} through the admin API", ep.identity(), drain ? "draining" : "undrained");
  telemetry::events().push("drain", upstream, ep.identity(),
                           drain ? "draining (admin API)" : "undrained (admin API)", steady_clock().now());
  if (drain)
    for (auto& w : s.workers) w->close_idle(ep);
}

// What the admin API (control thread) reads and does in this process.
RuntimeControl::Hooks control_hooks(Runtime::State& s) {
  const auto sum = [&s](std::size_t (Worker::*count)() const) {
    std::size_t n = 0;
    for (const auto& w : s.workers) n += (*w.*count)();
    return n;
  };
  return {
      .snapshot = [&s] { return s.snapshot; },
      .workers = [&s] { return static_cast<unsigned>(s.workers.size()); },
      .loaded_at = [&s] { return s.loaded_at; },
      .reload = [&s](bool watched) { return reload(s, watched); },
      .ready = [&s] { return s.ready; },
      .reloads_ok = [&s] { return s.reloads_ok; },
      .reloads_failed = [&s] { return s.reloads_failed; },
      .tls_handshakes = [&s] { return tls_handshakes(s); },
      .client_connections = [sum] { return sum(&Worker::active_sessions); },
      .parked_connections = [sum] { return sum(&Worker::parked_connections); },
      .upstream_connections = [&s] { return upstream_connections(s); },
      .drained = [&s](const std::string& upstream, Endpoint& ep,
                      bool drain) { drained_by_api(s, upstream, ep, drain); },
      .history = [&s]() -> const History& { return s.history; },
      .upgrade = [&s](const std::string& binary) { return upgrade_binary(s, binary); },
      .reopen_logs = [&s] { return reopen_logs(s, "admin API"); },
      .discovery_status =
          [&s](const std::string& upstream) {
            return s.discovery ? s.discovery->status(upstream) : boost::json::array();
          },
      .discovery_metrics =
          [&s](telemetry::MetricsText& m) {
            if (s.discovery) s.discovery->metrics(m);
          },
      .access_log_dropped = [&s] { return s.access_log->dropped(); },
      .reload_watch = [&s] { return reload_watch_status(s); },
      .rollbacks = [&s] { return s.rollbacks; },
  };
}

// The prober on the control thread: each result counted on its server, and readiness told once
// every health-checked server has had its first probe.
void start_prober(Runtime::State& s) {
  s.prober = std::make_unique<health::Prober>(s.control, steady_clock(), std::random_device{}());
  s.prober->on_transition = [](const health::ProbeTarget& t, const health::Transition& tr) {
    health::log_transition(t.upstream, *t.endpoint, tr);
  };
  s.prober->on_probe = [&s](const health::ProbeTarget& t, const health::ProbeResult& r) {
    (r.passed ? t.endpoint->probes_passed : t.endpoint->probes_failed).fetch_add(1, std::memory_order_relaxed);
    if (!s.notified_ready && first_probe_round_done(s)) notify_ready(s, "first health probes done");
  };
  update_probes(s);
}

// Ready at once when nothing is health-checked (or health_ready_timeout is 0), else after the
// first probe of every server or health_ready_timeout, whichever comes first.
void notify_ready_when_probed(Runtime::State& s) {
  const auto timeout = s.config->server.health_ready_timeout;
  if (first_probe_round_done(s) || timeout.count() == 0) return notify_ready(s, "listening");
  s.ready_timer.expires_after(timeout);
  s.ready_timer.async_wait([&s](boost::system::error_code ec) {
    if (!ec) notify_ready(s, "health_ready_timeout passed before every server was probed");
  });
}

// Health clock: ends ejections (half-open) and steps slow-start ramps. Workers can eject a
// server at any moment, so every server is looked at on a short period rather than only at a
// deadline computed earlier.
void health_tick(Runtime::State& s) {
  for (const auto& u : s.snapshot->upstreams)
    for (Endpoint* ep : u->endpoints())
      // next_deadline() is "now + one ramp step" while ramping: tick whenever there is work.
      if (ep->has_health() && ep->health().next_deadline() != Clock::time_point::max())
        if (auto t = ep->health().tick()) health::log_transition(u->name(), *ep, *t);
  if (s.state_file) s.state_file->update(*s.snapshot);  // changes of the last 100 ms: one write
  if (s.shutting_down) return;
  s.health_timer.expires_after(std::chrono::milliseconds(100));
  s.health_timer.async_wait([&s](boost::system::error_code ec) {
    if (!ec) health_tick(s);
  });
}

// The dashboard's history: one sample a second of the counters the workers keep anyway.
void history_tick(Runtime::State& s) {
  s.history.sample(*s.snapshot, static_cast<unsigned>(s.workers.size()));
  // Each worker counts its own pool on its thread and hands the count back to this one.
  for (std::size_t i = 0; i < s.workers.size(); ++i)
    s.workers[i]->count_pooled([&s, i](std::vector<std::uint32_t> counts) {
      net::post(s.control, [&s, i, counts = std::move(counts)]() mutable {
        s.history.set_pooled(i, std::move(counts));
      });
    });
  if (s.shutting_down) return;
  s.history_timer.expires_after(std::chrono::seconds(1));
  s.history_timer.async_wait([&s](boost::system::error_code ec) {
    if (!ec) history_tick(s);
  });
}

// The reload watch: the answers counted every 500 ms (the window before a reload, and the
// verdict on one, within half a second of a breach or of the watch's end).
void watch_ticks(Runtime::State& s) {
  watch_tick(s);
  if (s.shutting_down) return;
  s.watch_timer.expires_after(std::chrono::milliseconds(500));
  s.watch_timer.async_wait([&s](boost::system::error_code ec) {
    if (!ec) watch_ticks(s);
  });
}

// The workers accept, the prober and the control loop's timers start, and sluice says so.
// False (logged) when `[server] watch_config` cannot watch the file.
bool start_serving(Runtime::State& s) {
  for (auto& w : s.workers) w->start();
  s.loaded_at = steady_clock().now();
  s.ready = true;
  start_prober(s);
  // The pid is in the line because sluice writes no pid file: a supervisor (systemd's MainPID)
  // or this line is where a signal's target comes from.
  spdlog::info("sluice {} started: pid {}, {} worker(s), config {} (version {})", SLUICE_VERSION,
               ::getpid(), s.workers.size(), s.config_path, s.version);
  notify_ready_when_probed(s);
  s.notifier.start_watchdog();
  health_tick(s);
  if (s.config->admin.enabled) history_tick(s);
  watch_ticks(s);
  if (s.config->server.watch_config) {
    try {
      s.watch = std::make_unique<ConfigWatch>(s.control, s.config_path, [&s] { reload(s); });
    } catch (const std::exception& e) {
      spdlog::error("watch_config: {}", e.what());
      return false;
    }
  }
  return true;
}

}  // namespace

int Runtime::run() {
  auto& s = *state_;
  if (!build_first_snapshot(s)) return 1;
  restore_server_state(s);
  // Handlers go in before anything is announced: a SIGTERM right after "started" must be a
  // graceful shutdown, not the default action.
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR2}) s.signals.add(sig);
  s.signals.add(SIGUSR1);  // reopen the log files (nginx's convention, for logrotate)
  make_workers(s);
  auto inherited = InheritedListeners::from_environment();
  auto admin_fd = inherited.take_named(admin_fd_name);
  if (!open_listeners(s, inherited)) return 1;
  RuntimeControl control(control_hooks(s));
  s.control_api = &control;
  if (!open_first_admin(s, admin_fd)) return 1;
  if (!start_serving(s)) return 1;
  await_signal(s);

  s.control.run();
  for (auto& w : s.workers) w->join();
  if (s.state_file) s.state_file->write(*s.snapshot);
  s.access_log->flush();
  spdlog::info("sluice stopped");
  return 0;
}

}  // namespace sluice
