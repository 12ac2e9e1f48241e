// The control loop's reloads (control_loop.hpp): a file applied all or nothing, its admin
// listener and log files, the snapshot published to the workers and the prober, DNS membership
// changes applied like a reload, and the watch that rolls a breaching reload back.
#include "sluice/runtime/control_loop.hpp"

#include <unistd.h>

#include <algorithm>
#include <future>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "sluice/admin/server.hpp"
#include "sluice/config/loader.hpp"
#include "sluice/config/units.hpp"
#include "sluice/discovery/discovery.hpp"
#include "sluice/health/prober.hpp"
#include "sluice/runtime/config_watch.hpp"
#include "sluice/runtime/diff.hpp"
#include "sluice/runtime/fd_budget.hpp"
#include "sluice/runtime/fleet_tickets.hpp"
#include "sluice/runtime/worker.hpp"
#include "sluice/telemetry/access_log.hpp"
#include "sluice/telemetry/event_ring.hpp"
#include "sluice/telemetry/log_sink.hpp"

namespace sluice {

namespace net = boost::asio;

// The admin listener of `admin`, bound and serving, with its token read; at start-up it may take
// the socket a binary upgrade passed (`inherited_fd`, owned by it from now on) instead of
// binding. Throws (bind, token) std::runtime_error naming what failed.
std::unique_ptr<admin::Server> ControlLoop::open_admin(const config::AdminSection& admin, int inherited_fd) {
  const auto token = admin.token_file.empty() ? std::string() : admin::read_token_file(admin.token_file);
  auto server = std::make_unique<admin::Server>(io_, admin.listen, admin_api_, token);
  server->set_allowed_hosts(admin.allowed_hosts);
  server->start(inherited_fd);
  spdlog::info("admin listening on {}:{}", admin.listen.host, server->local_port());
  return server;
}

// The old admin listener after a reload moved it: the reload was probably asked through it, and
// its answer is still being written, so it closes a moment later instead of now.
void ControlLoop::retire_admin(std::unique_ptr<admin::Server> old) {
  if (!old) return;
  auto timer = std::make_shared<net::steady_timer>(io_, std::chrono::seconds(1));
  std::shared_ptr<admin::Server> server(std::move(old));
  timer->async_wait([timer, server](boost::system::error_code) { server->stop(); });
}

// What a reload does to the admin listener: a new one when it appears or moves (bound before the
// reload commits, so that a busy port fails the reload), else the token re-read (rotation).
struct ControlLoop::AdminChange {
  bool moved = false;
  std::unique_ptr<admin::Server> server;  // the new listener, when moved and enabled
  std::string token;
  std::vector<std::string> allowed_hosts;
};

ControlLoop::AdminChange ControlLoop::prepare_admin(const config::AdminSection& now) {
  const auto& was = config_->admin;
  AdminChange change;
  change.moved = now.enabled != was.enabled || now.listen.to_string() != was.listen.to_string();
  if (change.moved && now.enabled) change.server = open_admin(now);
  else if (now.enabled && !now.token_file.empty()) change.token = admin::read_token_file(now.token_file);
  change.allowed_hosts = now.allowed_hosts;
  return change;
}

void ControlLoop::commit_admin(AdminChange change) {
  if (!change.moved) {
    if (admin_server_) {
      admin_server_->set_token(std::move(change.token));
      admin_server_->set_allowed_hosts(std::move(change.allowed_hosts));
    }
    return;
  }
  if (admin_server_) spdlog::info("admin: stopped listening on {}", config_->admin.listen.to_string());
  retire_admin(std::move(admin_server_));
  admin_server_ = std::move(change.server);
}

// [log] access_file / error_file as a reload changes them: the new files are opened before the
// reload commits, so that one that cannot be opened fails it and nothing changes.
struct ControlLoop::LogFiles {
  std::optional<int> access, error;  // set when the path changes: the new descriptor (-1 = stdio)
};

ControlLoop::LogFiles ControlLoop::open_log_files(const config::LogSection& was, const config::LogSection& now) {
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

// [log] level, access, error_format and the files: applied to the loggers at once, each change
// logged.
void ControlLoop::apply_logging(const config::LogSection& was, const config::LogSection& now,
                   LogFiles files) {
  if (files.access) {
    access_log_->sink().adopt(*files.access, now.access_file);
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
    access_log_->set_format(now.access);
    spdlog::info("access log {} -> {}", access_format_name(was.access), access_format_name(now.access));
  }
}

// Points the prober at the snapshot's servers: one prober per server, on this (control) thread.
void ControlLoop::update_probes() {
  std::vector<std::string> probed;
  for (const auto& u : snapshot_->upstreams) {
    if (!u->config().health) continue;
    std::vector<health::ProbeTarget> targets;
    for (const auto& ep : u->shared_endpoints())
      targets.push_back({ep, &ep->health(), u->name(), ep->tls() ? u->shared_tls_context() : nullptr,
                         u->tls_server_name(*ep)});
    prober_->set_upstream(u->name(), *u->config().health, std::move(targets));
    probed.push_back(u->name());
  }
  for (const auto& name : probed_upstreams_)
    if (std::find(probed.begin(), probed.end(), name) == probed.end()) prober_->remove_upstream(name);
  probed_upstreams_ = std::move(probed);
}

// The snapshot of `cfg` with the servers DNS gives now (discovery/): the directory keeps the
// state of every endpoint whose identity stays, for a reload and a DNS change alike.
std::shared_ptr<const Snapshot> ControlLoop::build(const std::shared_ptr<const config::Config>& cfg,
                                      std::uint64_t version) {
  // The snapshot being replaced hands each kept route its rate limiter (proxy/admission).
  return build_snapshot(discovery_ ? discovery_->expand(cfg) : cfg, directory_, version,
                        snapshot_.get(), &ocsp_stapler_, fleet_tickets_ ? fleet_tickets_->keys() : nullptr);
}

// Endpoints of `old` that `now` does not have (removed from the file or gone from DNS): no new
// request, not even a retry from a request that started on `old`; in-flight ones finish; idle
// pooled connections close.
void ControlLoop::retire_removed(const Snapshot& old, const Snapshot& now) {
  for (const auto& u : old.upstreams)
    for (const auto& ep : u->shared_endpoints()) {
      bool kept = false;
      for (const auto& n : now.upstreams)
        for (const Endpoint* e : n->endpoints()) kept |= e == ep.get();
      if (kept) continue;
      ep->set_draining(true);
      for (auto& w : workers_) w->close_idle(ep);
    }
}

// Makes `snapshot` the one every new request and probe uses.
void ControlLoop::publish(std::shared_ptr<const Snapshot> snapshot) {
  const auto old = std::exchange(snapshot_, snapshot);
  // Removed servers are retired once every worker has switched: a request that starts on the old
  // snapshot meanwhile would find all of its servers draining and be answered 503 (a reload that
  // swaps a DNS name for another did, under ASan: integration/test_discovery.py).
  const auto retire = [this, old, snapshot] {
    if (old) retire_removed(*old, *snapshot);
  };
  if (workers_.empty()) {
    retire();
  } else {
    auto left = std::make_shared<std::atomic<std::size_t>>(workers_.size());
    auto all = std::make_shared<std::promise<void>>();
    auto switched = all->get_future();
    for (auto& w : workers_) {
      w->publish(snapshot, [left, all, this, retire] {
        if (left->fetch_sub(1, std::memory_order_acq_rel) != 1) return;
        all->set_value();
        net::post(io_, retire);
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
                   left->load(std::memory_order_acquire), workers_.size());
  }
  update_probes();
}

// DNS changed the membership of an upstream: the running config is built again, like a reload
// that keeps the file (one rebuild for the changes of one burst of answers).
void ControlLoop::apply_membership() {
  membership_pending_ = false;
  if (shutting_down_) return;
  try {
    publish(build(config_, version_ + 1));
    version_ += 1;
  } catch (const std::exception& e) {
    spdlog::error("applying DNS changes failed: {}; the previous servers keep serving", e.what());
  }
}

// Starts following the DNS names of `cfg` (at start-up and at reloads).
void ControlLoop::follow_dns(const config::Config& cfg) {
  bool wanted = false;
  for (const auto& u : cfg.upstreams) wanted |= u.discovers();
  if (!wanted && !discovery_) return;
  if (!discovery_) {
    discovery_ = std::make_unique<discovery::Discovery>(io_, steady_clock(), cfg.dns);
    discovery_->on_change = [this](const std::string& upstream, const std::string& name,
                                  const discovery::Change&) {
      telemetry::events().push("dns", upstream, name, "membership changed", steady_clock().now());
      if (membership_pending_) return;
      membership_pending_ = true;
      net::post(io_, [this] { apply_membership(); });
    };
  }
  discovery_->configure(cfg);
}

// At start-up, before anything listens: the first answers, so that the first snapshot has the
// servers (bounded by what the resolver may take: SRV, then its targets).
void ControlLoop::await_first_answers() {
  if (!discovery_) return;
  const auto& dns = config_->dns;
  const auto bound = 2 * dns.timeout * dns.attempts + std::chrono::seconds(1);
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!discovery_->settled() && std::chrono::steady_clock::now() < until)
    if (io_.run_one_until(until) == 0) break;
  io_.restart();
  for (const auto& f : discovery_->failures())
    spdlog::warn("upstream {}; no servers from it yet, resolving again", f);
}

// A reload as systemd sees it: RELOADING=1, then READY=1 whatever the outcome (a rejected
// config leaves the previous one serving, which is ready).
admin::ReloadOutcome ControlLoop::reload(bool watched) {
  if (notified_ready_) notifier_.reloading();
  auto out = reload_config(watched);
  if (notified_ready_) notifier_.ready(status_line());
  return out;
}

// Bind what is new, build, publish `cfg`: all or nothing (throws, and nothing changed). The one
// way a config starts serving after start-up: a reload of the file, and a rollback to the
// config a watched reload replaced, so that both keep the servers' state alike (drains,
// health, ejections, pooled connections: the directory keeps endpoints by identity).
void ControlLoop::apply_config(const std::shared_ptr<const config::Config>& cfg) {
  try {
    // Everything that can fail comes before the first change: new sockets are bound (and closed
    // again if a later step throws), the snapshot is built.
    const auto wanted = Listeners::of(*cfg);
    auto pending = listeners_.bind_new(io_, wanted, workers_.size());
    auto admin_change = prepare_admin(cfg->admin);
    // Names that stay keep their answers; new ones are resolved now and join when they answer.
    follow_dns(*cfg);
    auto snapshot = build(cfg, version_ + 1);
    auto log_files = open_log_files(config_->log, cfg->log);  // last: nothing throws after it
    const auto was = config_;
    version_ += 1;
    config_ = cfg;
    loaded_at_ = steady_clock().now();
    publish(snapshot);
    listeners_.apply(std::move(pending), wanted, workers_);
    listeners_.set_defer_accept(cfg->server.defer_accept);  // the open sockets, new ones too
    commit_admin(std::move(admin_change));
    apply_logging(was->log, cfg->log, log_files);
    if (cfg->server.watch_config != was->server.watch_config) apply_watch(cfg->server.watch_config);
    if (cfg->server.max_connections != was->server.max_connections) {
      const auto per_worker = connections_per_worker(*cfg, static_cast<unsigned>(workers_.size()));
      for (auto& w : workers_) w->set_max_connections(per_worker);
    }
    if (discovery_) discovery_->prune();  // names the new file no longer has
  } catch (...) {
    if (discovery_) {  // back to the running config's names, with their servers
      discovery_->configure(*config_);
      discovery_->prune();
    }
    throw;
  }
}

// The running count of answers, as the watch keeps it (each tick, and just before a reload).
void ControlLoop::record_traffic() {
  reload_watch_.record(traffic_.read(*snapshot_, static_cast<unsigned>(workers_.size())),
                        config_->reload.watch);
}

// After a reload applied: watch it, unless it asked not to be or [reload] watch is 0.
void ControlLoop::start_watch(std::shared_ptr<const config::Config> previous,
                 std::string fingerprint, std::vector<UpstreamUp> up_before, bool watched,
                 admin::ReloadOutcome& out) {
  reload_watch_.cancel();  // a reload during a watch: the newer one is watched against it
  watched_previous_.reset();
  status_note_.clear();
  watched_version_ = version_;
  const auto watch = config_->reload.watch;
  // The same text as before changes nothing a watch could blame (a SIGHUP of an unchanged file).
  const bool unchanged = previous->text == config_->text;
  if (!watched || watch.count() == 0 || unchanged) {
    rolled_back_.erase(fingerprint);  // applied on purpose: no longer refused
    watch_state_ = "unwatched";
    verdict_ = !watched    ? "applied (not watched: --no-watch)"
                : unchanged ? "applied (not watched: the file did not change)"
                            : "applied (not watched: reload.watch is 0s)";
    return;
  }
  reload_watch_.begin(config_->reload, std::move(up_before));
  watched_previous_ = std::move(previous);
  watched_fingerprint_ = std::move(fingerprint);
  watch_state_ = "watching";
  verdict_.clear();
  out.watch_ms = static_cast<unsigned long long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(watch).count());
  spdlog::info("config version {}: watching its traffic for {}", version_, config::format_duration(watch));
}

// Parse, validate, bind what is new, build, publish: all or nothing. Requests in flight keep
// their snapshot; a key that needs a restart refuses the whole file. `watched`: the reload is
// watched ([reload] watch) and a file rolled back before is refused.
admin::ReloadOutcome ControlLoop::reload_config(bool watched) {
  admin::ReloadOutcome out;
  auto result = config::load_file(config_path_);
  if (result.ok()) result.errors = restart_changes(*config_, *result.config);
  const auto fingerprint = result.ok() ? config_fingerprint(result.config->text) : std::string();
  if (const auto it = rolled_back_.find(fingerprint);
      result.errors.empty() && watched && it != rolled_back_.end()) {
    result.errors.push_back(
        {config_path_, 0, 0, "",
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
                  config_path_, result.errors.size());
    ++reloads_failed_;
    out.version = version_;
    telemetry::events().push("reload", "", "", "failed: " + out.errors.front(), steady_clock().now());
    return out;
  }
  for (const auto& w : result.warnings) spdlog::warn("reload: {}", w.to_string());
  try {
    auto cfg = std::make_shared<const config::Config>(std::move(*result.config));
    auto previous = config_;
    auto up_before = servers_up(*snapshot_);
    record_traffic();  // the window before ends here
    apply_config(cfg);
    ++reloads_ok_;
    spdlog::info("reloaded {} (config version {})", config_path_, version_);
    telemetry::events().push("reload", "", "", "config version " + std::to_string(version_),
                             steady_clock().now());
    out.ok = true;
    start_watch(std::move(previous), fingerprint, std::move(up_before), watched, out);
  } catch (const std::exception& e) {
    spdlog::error("reload of {} failed: {}; the previous configuration keeps serving", config_path_,
                  e.what());
    out.errors.push_back(config_path_ + ": " + e.what());
    ++reloads_failed_;
    telemetry::events().push("reload", "", "", "failed: " + out.errors.back(), steady_clock().now());
  }
  out.version = version_;
  return out;
}

// A watched reload breached: the config it replaced serves again, applied like any reload, and
// the file's version is refused until it changes (or `--no-watch`).
void ControlLoop::roll_back(const WatchVerdict& verdict) {
  const auto bad = watched_version_;
  spdlog::error("config version {} {}; restoring the previous configuration", bad, verdict.text);
  if (notified_ready_) notifier_.reloading();
  rolled_back_[watched_fingerprint_] = {bad, verdict.text};
  try {
    apply_config(watched_previous_);
    ++rollbacks_;
    watch_state_ = "rolled_back";
    status_note_ = "config version " + std::to_string(bad) + " " + verdict.text;
    spdlog::error("config version {} restored the configuration before version {}; {} stays refused "
                  "until it changes (or `sluice reload --no-watch`)", version_, bad, config_path_);
    telemetry::events().push("reload", "", "",
                             "config version " + std::to_string(bad) + " " + verdict.text +
                                 "; previous config restored as version " + std::to_string(version_),
                             steady_clock().now());
  } catch (const std::exception& e) {
    watch_state_ = "rollback_failed";
    status_note_ = "config version " + std::to_string(bad) + ": rollback failed";
    spdlog::error("rollback of config version {} failed: {}; it keeps serving", bad, e.what());
    telemetry::events().push("reload", "", "", "rollback failed: " + std::string(e.what()),
                             steady_clock().now());
  }
  watched_previous_.reset();
  if (notified_ready_) notifier_.ready(status_line());
}

// The reload watch's tick, every 500 ms: the answers counted (the window before a reload), then
// a verdict when one is due (within half a second of a breach or of the watch's end).
void ControlLoop::on_watch_tick() {
  record_traffic();
  if (!reload_watch_.watching()) return;
  const auto verdict = reload_watch_.judge(servers_up(*snapshot_));
  if (!verdict) return;
  verdict_ = verdict->text;
  if (verdict->kind == WatchVerdict::Kind::rolled_back) return roll_back(*verdict);
  watch_state_ = "applied";
  watched_previous_.reset();
  spdlog::info("config version {} {}", watched_version_, verdict->text);
  telemetry::events().push("reload", "", "",
                           "config version " + std::to_string(watched_version_) + " " + verdict->text,
                           steady_clock().now());
}

// /api/status's "reload": the last reload's watch and the files a rollback refuses.
boost::json::object ControlLoop::reload_watch() const {
  boost::json::object o;
  o["watch_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(config_->reload.watch).count();
  o["version"] = watched_version_;
  o["state"] = watch_state_;
  o["verdict"] = verdict_;
  boost::json::array refused;
  for (const auto& [fingerprint, r] : rolled_back_)
    refused.push_back({{"fingerprint", fingerprint}, {"version", r.version}, {"verdict", r.verdict}});
  o["rolled_back"] = std::move(refused);
  return o;
}

// `[server] watch_config` on, or off; a watch that stops may be the one whose event runs this
// reload, so it is destroyed after the reload returns.
void ControlLoop::apply_watch(bool watch) {
  if (watch && !config_watch_) {
    try {
      config_watch_ = std::make_unique<ConfigWatch>(io_, config_path_, [this] { reload(true); });
      spdlog::info("watching {} for changes", config_path_);
    } catch (const std::exception& e) {
      // The rest of the reload is applied; SIGHUP and the API still reload.
      spdlog::error("watch_config: {}", e.what());
    }
  } else if (!watch && config_watch_) {
    config_watch_->stop();
    std::shared_ptr<ConfigWatch> old(std::move(config_watch_));
    net::post(io_, [old] {});
    spdlog::info("no longer watching {}", config_path_);
  }
}

}  // namespace sluice
