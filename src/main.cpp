// sluice command line: run, check, reload, drain, undrain, --version, --help. Everything else
// lives in the modules.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "sluice/admin/client.hpp"
#include "sluice/admin/server.hpp"
#include "sluice/config/loader.hpp"
#include "sluice/config/units.hpp"
#include "sluice/discovery/discovery.hpp"
#include "sluice/runtime/diff.hpp"
#include "sluice/runtime/reload_watch.hpp"
#include "sluice/runtime/runtime.hpp"
#include "sluice/runtime/upgrade.hpp"
#include "sluice/telemetry/access_log.hpp"
#include "sluice/tls/openssl_memory.hpp"

namespace {

namespace config = sluice::config;
namespace admin = sluice::admin;
using namespace std::chrono_literals;

// The config file when --config is not given: /etc/sluice/sluice.toml for an installed binary
// (one in a bin or sbin directory under usr: /usr/sbin/sluice, /usr/local/bin/sluice, or the
// same under a staging root), else conf/sluice.toml relative to the working directory: a binary
// run from a build tree, as the demo runs it.
std::string default_config() {
  const std::filesystem::path dir = std::filesystem::path(sluice::own_binary()).parent_path();
  const auto above = dir.parent_path();
  const bool in_usr = above.filename() == "usr" ||
                      (above.filename() == "local" && above.parent_path().filename() == "usr");
  const bool installed = (dir.filename() == "bin" || dir.filename() == "sbin") && in_usr;
  return installed ? "/etc/sluice/sluice.toml" : "conf/sluice.toml";
}

constexpr std::string_view usage = R"(sluice - an L7 HTTP/1.1 reverse-proxy load balancer

Usage:
  sluice run [--config FILE]      run the proxy (default FILE: /etc/sluice/sluice.toml for a
                                  binary installed under /usr, else conf/sluice.toml)
  sluice [--config FILE]          same as run
  sluice check [--config] FILE    validate FILE; print every error as FILE:LINE:COL: key: message
  sluice check [--config] FILE --diff OLD
                                  ...and list what a reload from OLD to FILE would change
                                  (exit 1 when the reload would be refused: a key that needs a
                                  restart changes; `sluice upgrade` applies those)
  sluice check [--config] FILE --diff-running [--admin HOST:PORT] [--token-file F]
                                  ...the same against the config the running sluice serves
  sluice check [--config] FILE --resolve
                                  ...and resolve its DNS names once ([dns]), printing the servers
                                  they give (exit 1 when a name gives none)
  sluice reload [--wait] [--no-watch] [--config FILE] [--admin HOST:PORT] [--token-file F]
                                  validate FILE, then ask the running sluice to reload its config;
                                  it watches the new config's traffic ([reload] watch) and rolls
                                  back a clear breach. --wait: until that verdict (prints
                                  `applied` or `rolled back: ...`); --no-watch: a deliberate
                                  change, not watched (also applies a file rolled back before)
                                  (exit 0 reloaded/applied, 1 invalid, rejected or rolled back,
                                  2 admin API unreachable)
  sluice drain --upstream U --server S [--wait] [--timeout 60s] [--config FILE]
               [--admin HOST:PORT] [--token-file F]
                                  stop sending new requests to server S (its name, else its
                                  address); --wait: until its in-flight requests are done
                                  (exit 0 drained, 1 refused or timed out, 2 admin API unreachable)
  sluice undrain --upstream U --server S [--config FILE] [--admin HOST:PORT] [--token-file F]
                                  put server S back into rotation
  sluice status [--config FILE] [--admin HOST:PORT] [--token-file F]
                                  the running sluice's upstreams and servers: state, in flight,
                                  requests (exit 0, 2 admin API unreachable)
  sluice upgrade [--binary PATH] [--config FILE] [--admin HOST:PORT] [--token-file F]
                                  replace the running process with PATH (default: the binary it
                                  runs) without refusing a connection: the new process inherits
                                  the listening sockets; the old one drains and exits
                                  (exit 0 upgraded, 1 the new process failed and the old one
                                  keeps serving, 2 admin API unreachable)
  sluice --version                print the version
  sluice --help                   this text

reload, drain, undrain, upgrade, status and check --diff-running talk to the admin API: at --admin, else at FILE's [admin] listen; with
the token in --token-file, else in FILE's [admin] token_file.

Signals: SIGHUP reloads the config file; SIGTERM/SIGINT shut down gracefully; SIGUSR2 upgrades to the same binary path (as `sluice upgrade`); SIGUSR1 reopens the log files (logrotate).
)";

// Exit codes of the admin commands.
constexpr int exit_ok = 0;
constexpr int exit_failed = 1;       // invalid config, rejected, timed out
constexpr int exit_unreachable = 2;  // the admin API cannot be reached (or told where it is)
constexpr int exit_usage = 2;

struct Options {
  std::string command = "run";
  std::string config = default_config();
  bool config_given = false;
  std::string admin;       // --admin HOST:PORT
  std::string token_file;  // --token-file F
  std::string upstream;    // --upstream U
  std::string server;      // --server S
  bool wait = false;       // --wait
  std::string timeout;     // --timeout D
  std::string diff;        // check --diff OLD
  std::string binary;      // upgrade --binary PATH
  bool diff_running = false;  // check --diff-running
  bool resolve = false;       // check --resolve
  bool no_watch = false;      // reload --no-watch
  std::string error;
};

bool is_admin_command(std::string_view command) {
  return command == "reload" || command == "drain" || command == "undrain" || command == "upgrade" ||
         command == "status";
}

// The flags from args[i] on, read into `o`; the first bad one sets o.error and ends the reading.
void read_flags(Options& o, const std::vector<std::string_view>& args, std::size_t i) {
  // "--flag VALUE" or "--flag=VALUE": true when args[i] is that flag; the value goes to `out`.
  const auto value_flag = [&](std::string_view flag, std::string& out) {
    const auto a = args[i];
    if (a.starts_with(flag) && a.size() > flag.size() && a[flag.size()] == '=') {
      out = std::string(a.substr(flag.size() + 1));
      return true;
    }
    if (a != flag) return false;
    if (i + 1 >= args.size()) {
      o.error = std::string(flag) + " needs a value";
    } else {
      out = std::string(args[++i]);
    }
    return true;
  };
  for (; i < args.size() && o.error.empty(); ++i) {
    const auto a = args[i];
    if (value_flag("--diff", o.diff)) continue;
    if (value_flag("--binary", o.binary)) continue;
    if (value_flag("--config", o.config) || value_flag("-c", o.config)) {
      o.config_given = true;
    } else if (value_flag("--admin", o.admin) || value_flag("--token-file", o.token_file) ||
               value_flag("--upstream", o.upstream) || value_flag("--server", o.server) ||
               value_flag("--timeout", o.timeout)) {
      // Which command a flag belongs to is checked after (misplaced_flag).
    } else if (a == "--wait") {
      o.wait = true;
    } else if (a == "--diff-running") {
      o.diff_running = true;
    } else if (a == "--resolve") {
      o.resolve = true;
    } else if (a == "--no-watch") {
      o.no_watch = true;
    } else if (a == "--help" || a == "-h") {
      o.command = "help";
    } else if (a == "--version" || a == "-V") {
      o.command = "version";
    } else if (!a.starts_with("-") && o.command == "check" && !o.config_given) {
      o.config = std::string(a);
      o.config_given = true;
    } else {
      o.error = "unknown argument '" + std::string(a) + "'";
    }
  }
}

// A flag given to a command it does not apply to, or a flag the command needs and lacks: the
// error that says so, else "".
std::string misplaced_flag(const Options& o) {
  const bool drain = o.command == "drain";
  const bool drain_like = drain || o.command == "undrain";
  const bool talks_to_admin = is_admin_command(o.command) || o.diff_running;
  if ((!o.diff.empty() || o.diff_running) && o.command != "check")
    return "--diff and --diff-running apply to check";
  if (o.resolve && o.command != "check") return "--resolve applies to check";
  if (!o.diff.empty() && o.diff_running) return "--diff and --diff-running exclude each other";
  if (!talks_to_admin && (!o.admin.empty() || !o.token_file.empty())) {
    return "--admin and --token-file apply to reload, drain, undrain, upgrade, status and check "
           "--diff-running";
  }
  if (!drain_like && (!o.upstream.empty() || !o.server.empty()))
    return "--upstream and --server apply to drain and undrain";
  if (o.command != "upgrade" && !o.binary.empty()) return "--binary applies to upgrade";
  if (!drain && o.command != "reload" && o.wait) return "--wait applies to drain and reload";
  if (!drain && !o.timeout.empty()) return "--timeout applies to drain";
  if (o.command != "reload" && o.no_watch) return "--no-watch applies to reload";
  if (drain_like && (o.upstream.empty() || o.server.empty()))
    return o.command + " needs --upstream U and --server S";
  return "";
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::vector<std::string_view> args(argv + 1, argv + argc);
  std::size_t i = 0;
  if (i < args.size() && !args[i].starts_with("-")) o.command = std::string(args[i++]);
  read_flags(o, args, i);
  if (!o.error.empty() || o.command == "help" || o.command == "version") return o;
  o.error = misplaced_flag(o);
  return o;
}

int run(const std::string& given, bool openssl_memory) {
  // Absolute, so that the running process names its file unambiguously (GET /api/config, and
  // `sluice reload --config F` comparing F with it) whatever directory it was started from.
  const std::string path = std::filesystem::absolute(given).lexically_normal().string();
  auto result = config::load_file(path);
  if (!result.ok()) {
    for (const auto& e : result.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    std::fprintf(stderr, "sluice: %s has %zu error(s); not starting\n", path.c_str(),
                 result.errors.size());
    return 1;
  }
  try {
    sluice::configure_error_log(result.config->log);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice: log.error_file: %s; not starting\n", e.what());
    return 1;
  }
  for (const auto& w : result.warnings) spdlog::warn("{}", w.to_string());
  if (!openssl_memory) spdlog::warn("OpenSSL allocated before main(): TLS record buffers come from the heap");
  sluice::Runtime runtime(std::move(*result.config), path);
  return runtime.run();
}

// Where the admin API is and the token it wants.
struct AdminTarget {
  config::HostPort address;
  std::string token;
};

// The config file matters to an admin command unless --admin alone says where to go: reload
// validates it, and it names the admin address and token file. False (errors printed) when it is
// needed and invalid; `out` stays empty when it is not needed.
bool load_for_admin(const Options& o, std::string_view action, std::optional<config::Config>& out) {
  if (!o.config_given && !o.admin.empty()) return true;
  auto result = config::load_file(o.config);
  if (!result.ok()) {
    for (const auto& e : result.errors) std::printf("%s\n", e.to_string().c_str());
    std::fprintf(stderr, "sluice: %s has %zu error(s); not %.*s\n", o.config.c_str(),
                 result.errors.size(), static_cast<int>(action.size()), action.data());
    return false;
  }
  out = std::move(result.config);
  return true;
}

// --admin / --token-file, else the config's [admin] section. nullopt (reason printed) when the
// address is unknown or the token file unreadable.
std::optional<AdminTarget> admin_target(const Options& o,
                                        const std::optional<config::Config>& cfg) {
  AdminTarget target;
  if (!o.admin.empty()) {
    std::string why;
    auto address = config::parse_host_port(o.admin, false, &why);
    if (!address) {
      std::fprintf(stderr, "sluice: --admin: %s\n", why.c_str());
      return std::nullopt;
    }
    target.address = std::move(*address);
  } else if (!cfg || !cfg->admin.enabled) {
    std::fprintf(stderr, "sluice: %s has no [admin] section; pass --admin HOST:PORT\n",
                 o.config.c_str());
    return std::nullopt;
  } else if (cfg->admin.listen.port == 0) {
    std::fprintf(
        stderr,
        "sluice: %s: admin.listen has port 0 (picked at start-up); pass --admin HOST:PORT\n",
        o.config.c_str());
    return std::nullopt;
  } else {
    target.address = cfg->admin.listen.reachable();
  }
  const std::string token_file = !o.token_file.empty() ? o.token_file
                                 : cfg                 ? cfg->admin.token_file
                                                       : "";
  if (!token_file.empty()) {
    try {
      target.token = admin::read_token_file(token_file);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sluice: %s\n", e.what());
      return std::nullopt;
    }
  }
  return target;
}

int unreachable(const admin::Client& client, const boost::system::error_code& ec) {
  std::fprintf(stderr, "sluice: cannot reach the admin API at %s: %s\n",
               client.address().to_string().c_str(), ec.message().c_str());
  return exit_unreachable;
}

// A non-2xx answer: its {"error": ...} text, else the raw body.
int refused(const admin::ClientResponse& res, std::string_view what) {
  boost::system::error_code ec;
  const auto body = boost::json::parse(res.body, ec);
  std::string reason = res.body;
  if (!ec && body.is_object()) {
    if (const auto* error = body.as_object().if_contains("error");
        error != nullptr && error->is_string()) {
      reason = std::string(error->as_string());
    }
  }
  std::fprintf(stderr, "sluice: %.*s refused (HTTP %u): %s\n", static_cast<int>(what.size()),
               what.data(), res.status, reason.c_str());
  return exit_failed;
}

// The same file, however each side spells its path.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec)) return true;
  return std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec);
}

// A process reloads the file it was started with: `reload --config F` with another F would
// report a success that did not load F, so it is refused. exit_ok when F is the running file.
int check_running_file(const Options& o, admin::Client& client) {
  const auto res = client.get("/api/config");
  if (!res) return unreachable(client, res.error());
  if (res->status != 200) return refused(*res, "GET /api/config");
  if (res->config_source.empty() || same_file(o.config, res->config_source)) return exit_ok;
  std::fprintf(stderr,
               "sluice: %s is not the running config: the running sluice reloads %s; edit that "
               "file, or restart sluice with --config %s\n",
               o.config.c_str(), res->config_source.c_str(), o.config.c_str());
  return exit_failed;
}

// `reload --wait`: polls /api/status until the watch of `version` has its verdict; prints it.
int await_verdict(admin::Client& client, unsigned long long version, std::chrono::milliseconds watch) {
  // The verdict comes within half a second of the watch's end; a rollback takes a reload's time.
  const auto deadline = std::chrono::steady_clock::now() + watch + 15s;
  while (true) {
    const auto status = client.get("/api/status");
    if (!status) return unreachable(client, status.error());
    if (status->status != 200) return refused(*status, "status");
    boost::system::error_code ec;
    const auto body = boost::json::parse(status->body, ec);
    const auto* root = !ec && body.is_object() ? &body.as_object() : nullptr;
    const auto* reload = root != nullptr ? root->if_contains("reload") : nullptr;
    if (reload == nullptr || !reload->is_object()) {
      std::fprintf(stderr, "sluice: unexpected /api/status answer: no \"reload\"\n");
      return exit_failed;
    }
    const auto& r = reload->as_object();
    const auto* watched = r.if_contains("version");
    const auto* state = r.if_contains("state");
    const auto* verdict = r.if_contains("verdict");
    if (watched == nullptr || !watched->is_number() || state == nullptr || !state->is_string() ||
        verdict == nullptr || !verdict->is_string()) {
      std::fprintf(stderr, "sluice: unexpected /api/status answer: bad \"reload\"\n");
      return exit_failed;
    }
    if (watched->to_number<unsigned long long>() != version) {
      std::fprintf(stderr, "sluice: config version %llu was replaced by another reload before its "
                           "verdict\n", version);
      return exit_failed;
    }
    const std::string_view now = state->as_string();
    if (now != "watching") {
      std::printf("%s\n", verdict->as_string().c_str());
      return now == "applied" || now == "unwatched" ? exit_ok : exit_failed;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr, "sluice: no verdict on config version %llu after %s\n", version,
                   config::format_duration(std::chrono::duration_cast<config::Duration>(watch + 15s)).c_str());
      return exit_failed;
    }
    std::this_thread::sleep_for(200ms);  // the poll interval; a CLI process, not a test
  }
}

int reload(const Options& o) {
  std::optional<config::Config> cfg;
  if (!load_for_admin(o, "reloading", cfg)) return exit_failed;
  const auto target = admin_target(o, cfg);
  if (!target) return exit_unreachable;
  admin::Client client(target->address, target->token, 30s);
  if (o.config_given) {
    if (const int code = check_running_file(o, client); code != exit_ok) return code;
  }
  const auto res = client.post(o.no_watch ? "/api/reload?watch=0" : "/api/reload");
  if (!res) return unreachable(client, res.error());
  if (res->status != 200 && res->status != 422) return refused(*res, "reload");
  boost::system::error_code ec;
  const auto body = boost::json::parse(res->body, ec);
  const auto* object = !ec && body.is_object() ? &body.as_object() : nullptr;
  if (res->status == 200) {
    const auto number = [&](std::string_view key) -> unsigned long long {
      const auto* v = object != nullptr ? object->if_contains(key) : nullptr;
      return v != nullptr && v->is_number() ? v->to_number<unsigned long long>() : 0;
    };
    const auto version = number("version");
    const auto watch_ms = number("watch_ms");
    if (version != 0) {
      std::printf("reloaded: config version %llu%s\n", version,
                  watch_ms != 0 ? (", watched for " + config::format_duration(std::chrono::milliseconds(watch_ms))).c_str()
                  : o.no_watch  ? ", not watched"
                                : "");
    } else {
      std::printf("reloaded\n");
    }
    std::fflush(stdout);
    if (!o.wait || watch_ms == 0 || version == 0) {
      if (o.wait) std::printf("applied\n");
      return exit_ok;
    }
    return await_verdict(client, version, std::chrono::milliseconds(watch_ms));
  }
  // 422: the running process found errors in the file it reloads (which may not be FILE).
  const auto* errors = object != nullptr ? object->if_contains("errors") : nullptr;
  std::size_t count = 0;
  if (errors != nullptr && errors->is_array()) {
    for (const auto& e : errors->as_array()) {
      if (!e.is_string()) continue;
      std::printf("%s\n", e.as_string().c_str());
      ++count;
    }
  }
  std::fprintf(stderr,
               "sluice: reload rejected: %zu error(s); the previous configuration keeps serving\n",
               count);
  return exit_failed;
}

// The running process starts the new binary itself (it holds the sockets to hand over) and
// answers once the new process accepts, or with why it did not come up.
int upgrade(const Options& o) {
  std::optional<config::Config> cfg;
  if (!load_for_admin(o, "upgrading", cfg)) return exit_failed;
  const auto target = admin_target(o, cfg);
  if (!target) return exit_unreachable;
  std::string binary = o.binary;
  if (!binary.empty()) {
    std::error_code ec;
    const auto absolute = std::filesystem::absolute(binary, ec);  // the process has its own cwd
    if (!ec) binary = absolute.string();
  }
  admin::Client client(target->address, target->token, 60s);
  const auto res = client.post("/api/upgrade" +
                               (binary.empty() ? std::string() : "?binary=" + admin::encode_path_segment(binary)));
  if (!res) return unreachable(client, res.error());
  if (res->status != 200) return refused(*res, "upgrade");
  boost::system::error_code ec;
  const auto body = boost::json::parse(res->body, ec);
  const auto* pid = !ec && body.is_object() ? body.as_object().if_contains("pid") : nullptr;
  if (pid != nullptr && pid->is_number()) {
    std::printf("upgraded: pid %lld serves\n", pid->to_number<long long>());
  } else {
    std::printf("upgraded\n");
  }
  return exit_ok;
}

// A short summary of what the running process serves (GET /api/status).
int status(const Options& o) {
  std::optional<config::Config> cfg;
  if (!load_for_admin(o, "asking for the status", cfg)) return exit_failed;
  const auto target = admin_target(o, cfg);
  if (!target) return exit_unreachable;
  admin::Client client(target->address, target->token, 10s);
  const auto res = client.get("/api/status");
  if (!res) return unreachable(client, res.error());
  if (res->status != 200) return refused(*res, "status");
  std::string why;
  const auto summary = admin::status_summary(res->body, &why);
  if (!summary) {
    std::fprintf(stderr, "sluice: unexpected /api/status answer: %s\n", why.c_str());
    return exit_failed;
  }
  std::fputs(summary->c_str(), stdout);
  return exit_ok;
}

// `drain --wait`: polls the server's status until its in-flight requests are done (exit 0), it
// is undrained or the status cannot be read (1), or `timeout` passes (1).
int await_drained(const Options& o, admin::Client& client, config::Duration timeout) {
  const std::string who = o.upstream + "/" + o.server;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::optional<std::uint64_t> last_in_flight;
  while (true) {
    const auto status = client.get("/api/status");
    if (!status) return unreachable(client, status.error());
    if (status->status != 200) return refused(*status, "status");
    std::string why;
    const auto server = admin::find_server_status(status->body, o.upstream, o.server, &why);
    if (!server) {
      std::fprintf(stderr, "sluice: unexpected /api/status answer: %s\n", why.c_str());
      return exit_failed;
    }
    if (!server->found) {
      // A reload removed it: nothing new can reach it any more.
      std::printf("%s: no longer configured\n", who.c_str());
      return exit_ok;
    }
    if (!server->draining) {
      std::fprintf(stderr, "sluice: %s is no longer draining (undrained meanwhile)\n", who.c_str());
      return exit_failed;
    }
    if (server->in_flight == 0 && server->unconfirmed == 0) {
      std::printf("%s: drained\n", who.c_str());
      return exit_ok;
    }
    if (last_in_flight != server->in_flight) {
      std::printf("%s: %llu request(s) in flight\n", who.c_str(),
                  static_cast<unsigned long long>(server->in_flight));
      std::fflush(stdout);
      last_in_flight = server->in_flight;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr, "sluice: timeout after %s: %s still has %llu request(s) in flight\n",
                   config::format_duration(timeout).c_str(), who.c_str(),
                   static_cast<unsigned long long>(server->in_flight));
      return exit_failed;
    }
    std::this_thread::sleep_for(100ms);  // the poll interval; a CLI process, not a test
  }
}

int set_drain(const Options& o, bool drain) {
  config::Duration timeout = 60s;
  if (!o.timeout.empty()) {
    std::string why;
    const auto parsed = config::parse_duration(o.timeout, &why);
    if (!parsed) {
      std::fprintf(stderr, "sluice: --timeout: %s\n", why.c_str());
      return exit_usage;
    }
    timeout = *parsed;
  }
  std::optional<config::Config> cfg;
  if (!load_for_admin(o, drain ? "draining" : "undraining", cfg)) return exit_failed;
  const auto target = admin_target(o, cfg);
  if (!target) return exit_unreachable;

  const std::string who = o.upstream + "/" + o.server;
  admin::Client client(target->address, target->token, 10s);
  const std::string path = "/api/upstreams/" + admin::encode_path_segment(o.upstream) +
                           "/servers/" + admin::encode_path_segment(o.server) +
                           (drain ? "/drain" : "/undrain");
  const auto res = client.post(path);
  if (!res) return unreachable(client, res.error());
  if (res->status != 200) return refused(*res, drain ? "drain" : "undrain");
  if (!drain || !o.wait) {
    std::printf("%s: %s\n", who.c_str(), drain ? "draining" : "undrained");
    std::fflush(stdout);
    return exit_ok;
  }

  std::printf("%s: draining; waiting up to %s for in-flight requests\n", who.c_str(),
              config::format_duration(timeout).c_str());
  std::fflush(stdout);
  return await_drained(o, client, timeout);
}

// The drain state of every server of the running process (GET /api/status); nullopt (reason
// printed) when it cannot be read.
std::optional<std::vector<sluice::RunningServer>> running_drains(const Options& o,
                                                                 const std::optional<config::Config>& cfg) {
  const auto target = admin_target(o, cfg);
  if (!target) return std::nullopt;
  admin::Client client(target->address, target->token, 30s);
  const auto res = client.get("/api/status");
  if (!res) {
    unreachable(client, res.error());
    return std::nullopt;
  }
  boost::system::error_code ec;
  const auto body = boost::json::parse(res->body, ec);
  std::vector<sluice::RunningServer> out;
  const auto* upstreams = !ec && body.is_object() ? body.as_object().if_contains("upstreams") : nullptr;
  if (res->status != 200 || upstreams == nullptr || !upstreams->is_array()) {
    std::fprintf(stderr, "sluice: unexpected /api/status answer (HTTP %u)\n", res->status);
    return std::nullopt;
  }
  for (const auto& u : upstreams->as_array()) {
    const auto* name = u.is_object() ? u.as_object().if_contains("name") : nullptr;
    const auto* servers = u.is_object() ? u.as_object().if_contains("servers") : nullptr;
    if (name == nullptr || !name->is_string() || servers == nullptr || !servers->is_array()) continue;
    for (const auto& sv : servers->as_array()) {
      const auto* identity = sv.is_object() ? sv.as_object().if_contains("identity") : nullptr;
      const auto* draining = sv.is_object() ? sv.as_object().if_contains("draining") : nullptr;
      if (identity == nullptr || !identity->is_string() || draining == nullptr || !draining->is_bool()) continue;
      out.push_back({std::string(name->as_string()), std::string(identity->as_string()), draining->as_bool()});
    }
  }
  return out;
}

// `check --diff-running`: when the running process rolled FILE back (this very text), the
// verdict; the diff above is then what the rollback undid. nullopt when it did not (or the
// process says nothing of it).
std::optional<std::string> rolled_back_verdict(const Options& o, const std::optional<config::Config>& cfg) {
  const auto target = admin_target(o, cfg);
  if (!target || !cfg) return std::nullopt;
  admin::Client client(target->address, target->token, 30s);
  const auto res = client.get("/api/status");
  if (!res || res->status != 200) return std::nullopt;
  boost::system::error_code ec;
  const auto body = boost::json::parse(res->body, ec);
  const auto* reload = !ec && body.is_object() ? body.as_object().if_contains("reload") : nullptr;
  const auto* list = reload != nullptr && reload->is_object() ? reload->as_object().if_contains("rolled_back") : nullptr;
  if (list == nullptr || !list->is_array()) return std::nullopt;
  const auto mine = sluice::config_fingerprint(cfg->text);
  for (const auto& r : list->as_array()) {
    const auto* entry = r.if_object();
    if (entry == nullptr) continue;
    const auto* fp = entry->if_contains("fingerprint");
    const auto* version = entry->if_contains("version");
    const auto* verdict = entry->if_contains("verdict");
    if (fp == nullptr || !fp->is_string() || fp->as_string() != mine || version == nullptr ||
        !version->is_number() || verdict == nullptr || !verdict->is_string())
      continue;
    return "config version " + std::to_string(version->to_number<unsigned long long>()) + " " +
           std::string(verdict->as_string());
  }
  return std::nullopt;
}

// `check --diff-running`: the text the running process parsed, loaded into `old` and named in
// `against`. An exit code (reason printed) when the process cannot be asked.
std::optional<int> load_running(const Options& o, const std::optional<config::Config>& now,
                                std::string& against, config::LoadResult& old) {
  const auto target = admin_target(o, now);
  if (!target) return exit_unreachable;
  admin::Client client(target->address, target->token, 30s);
  const auto res = client.get("/api/config");
  if (!res) return unreachable(client, res.error());
  if (res->status != 200) return refused(*res, "GET /api/config");
  against = res->config_source.empty() ? "the running config"
                                       : "the running config (" + res->config_source + ")";
  old = config::load_string(res->body, res->config_source.empty() ? "<running>" : res->config_source);
  return std::nullopt;
}

// What a reload from `old` (named `against`) to FILE's config `now` would change, printed. Exit 1
// when the reload would be refused: a restart-only key changed, or (--diff-running) the running
// process rolled this very text back.
int print_diff(const Options& o, const std::optional<config::Config>& now, const config::Config& old,
               const std::string& against) {
  auto changes = sluice::config_diff(old, *now);
  if (o.diff_running) {
    const auto drains = running_drains(o, now);
    if (!drains) return exit_unreachable;
    for (auto& line : sluice::running_drain_diff(old, *now, *drains)) changes.push_back(std::move(line));
  }
  if (changes.empty()) std::printf("no changes from %s\n", against.c_str());
  for (const auto& line : changes) std::printf("%s\n", line.c_str());
  if (o.diff_running) {
    if (const auto verdict = rolled_back_verdict(o, now)) {
      // The diff above is then what the rollback undid; the running process refuses this text.
      std::printf("%s: %s; the changes above were undone. `sluice reload` refuses "
                  "this file until it changes; `sluice reload --no-watch` applies it anyway\n",
                  o.config.c_str(), verdict->c_str());
      return exit_failed;
    }
  }
  // The same rule the running process applies to a reload (runtime/diff.hpp): a changed
  // restart-only key makes it refuse the whole file, so the diff says so and fails.
  const auto refused_keys = sluice::restart_changes(old, *now);
  if (refused_keys.empty()) return exit_ok;
  std::string keys;
  for (const auto& e : refused_keys) keys += (keys.empty() ? "" : ", ") + e.key_path;
  std::printf("reload would be refused: %zu key(s) need a restart (%s); `sluice upgrade` or a "
              "restart applies them\n", refused_keys.size(), keys.c_str());
  return exit_failed;
}

}  // namespace

// `check`: validate FILE; with --diff OLD or --diff-running, list what a reload from that config
// to FILE would change. The config a process runs can differ from every file on disk (edited
// since its last reload), so --diff-running asks the process for the text it parsed.
int check(const Options& o) {
  const auto result = config::load_file(o.config);
  if (!result.ok()) {
    // Errors, then the summary, all on stdout: `check FILE | less` shows them in that order.
    for (const auto& e : result.errors) std::printf("%s\n", e.to_string().c_str());
    std::printf("%s: %zu error(s)\n", o.config.c_str(), result.errors.size());
    return exit_failed;
  }
  // Warnings do not fail the check (exit 0): stderr, so that scripts reading stdout are unchanged.
  for (const auto& w : result.warnings) std::fprintf(stderr, "warning: %s\n", w.to_string().c_str());
  std::printf("%s\n", config::summary(*result.config).c_str());
  if (o.resolve) {
    const auto report = sluice::discovery::resolve_once(*result.config);
    for (const auto& line : report.lines) std::printf("%s\n", line.c_str());
    if (report.failed != 0) return exit_failed;
  }
  if (o.diff.empty() && !o.diff_running) return exit_ok;

  std::string against = o.diff;
  config::LoadResult old;
  if (!o.diff_running) old = config::load_file(o.diff);
  else if (const auto failed = load_running(o, result.config, against, old)) return *failed;
  if (!old.ok()) {
    for (const auto& e : old.errors) std::printf("%s\n", e.to_string().c_str());
    std::fprintf(stderr, "%s: %zu error(s); cannot diff against it\n", against.c_str(), old.errors.size());
    return exit_failed;
  }
  return print_diff(o, result.config, *old.config, against);
}

// A usage error is one line and a pointer to the help (which is 40 lines: it would scroll the
// error itself off the screen), as git and systemctl answer; exit 2.
int usage_error(const std::string& error) {
  std::fprintf(stderr, "sluice: %s\nsee 'sluice --help'\n", error.c_str());
  return exit_usage;
}

int main(int argc, char** argv) {
  // Before anything reaches OpenSSL: its record buffers then come from per-thread caches
  // (tls/openssl_memory.hpp). Too late only if a static initializer used OpenSSL; malloc then.
  const bool openssl_memory = sluice::tls::install_openssl_memory();
  const auto o = parse_args(argc, argv);
  if (!o.error.empty()) return usage_error(o.error);
  if (o.command == "help") {
    std::printf("%.*s", static_cast<int>(usage.size()), usage.data());
    return 0;
  }
  if (o.command == "version") {
    std::printf("sluice %s\n", SLUICE_VERSION);
    return 0;
  }
  if (o.command == "check") return check(o);
  if (o.command == "run") return run(o.config, openssl_memory);
  if (o.command == "reload") return reload(o);
  if (o.command == "drain") return set_drain(o, true);
  if (o.command == "undrain") return set_drain(o, false);
  if (o.command == "upgrade") return upgrade(o);
  if (o.command == "status") return status(o);
  return usage_error("unknown command '" + o.command + "'");
}
