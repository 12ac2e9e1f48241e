#pragma once
// Active health checks: sends each server its probe request on its ProbeSchedule and feeds the
// verdict to the server's ServerHealth::probe_result().
//
// One prober for the whole process, on the CONTROL thread (the io_context run by the runtime's
// control loop, not a worker): one probe loop per server, whatever the number of workers. A probe:
//   1. connect to the server's address (or [health].port) unless a keep-alive connection is open,
//      with TLS (verified like requests are) when the server is a TLS server;
//   2. send `METHOD path HTTP/1.1`, `Host: [health].host or the server's address_text()`,
//      `User-Agent: sluice-health` (keep-alive, RFC 9112 §9.3);
//   3. read the response head and at most 64 KiB of body;
// all within [health].timeout from the start of the probe, on the prober's clock (one timer per
// probe wakes it and closes the socket).
// It passes when the status is in expect_status and, if expect_body is set, the body (its first
// 64 KiB) contains it. Failure details, as they appear in transition reasons:
//   "connect refused"  "connect timeout"  "connect error: <system message>"  "timeout"
//   "status 503 not in 200-399"  "body does not contain 'ok'"  "connection reset"
//   "connection closed" (EOF before the response was complete)  "bad response" (unparsable)
//   "certificate verify failed: <OpenSSL's reason>"  "tls handshake failed: <reason>"
// The connection is kept for the next probe when the response allows it (complete, keep-alive,
// nothing left over). A kept connection the origin closed while idle fails before any response
// byte; the probe then reconnects once, within the same timeout, and that is not a failure.
//
// Schedules follow ProbeSchedule(interval, jitter, seed_for(identity, seed)): the first probe at
// a random moment within one interval, then interval × (1 ± jitter) after the previous
// *scheduled* time. At most one probe per server is in flight; a probe that overruns its next
// slot makes the server skip that slot rather than probe back to back.
//
// The prober never calls ServerHealth::tick(): the runtime does (see server_health.hpp).
//
// Threads: every method, and both callbacks, run on the control thread. No exception leaves a
// probe loop (I/O errors are error_codes; anything thrown, e.g. by a callback, is logged and the
// loop goes on). Memory per server is bounded: a socket, two timers, and a probe's buffers
// (≤ 16 KiB head + 64 KiB body) only while it runs.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "sluice/config/config.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/health/schedule.hpp"
#include "sluice/health/server_health.hpp"
#include "sluice/tls/context.hpp"
#include "sluice/endpoint/endpoint.hpp"

namespace sluice::health {

// One server to probe.
struct ProbeTarget {
  std::shared_ptr<Endpoint> endpoint;  // address, identity; the probe loop shares ownership
  ServerHealth* health = nullptr;      // owned elsewhere; must live until the target is removed
  std::string upstream;                // for logs
  // TLS servers: the upstream's client context and the name to ask for and verify; nullptr for
  // plain servers.
  std::shared_ptr<tls::ClientContext> tls;
  std::string tls_server_name;
};

class Prober {
public:
  // `clock` measures latencies and schedules; it must outlive the prober. `seed` is the base of
  // every server's schedule seed (production: random once per process; tests: a constant).
  Prober(boost::asio::io_context& control, const Clock& clock, std::uint64_t seed);
  ~Prober();  // stop()

  Prober(const Prober&) = delete;
  Prober& operator=(const Prober&) = delete;

  // Starts or updates probing of upstream `name`'s servers. On reload, a target whose endpoint is
  // the same object as before keeps its schedule and its keep-alive connection (a new interval or
  // jitter restarts its schedule with a random first probe within the new interval; a new port
  // drops the connection at its next probe); targets no longer listed stop; new ones start with a
  // random first probe within one interval. A probe already in flight finishes with the settings
  // it started with. Targets without an endpoint or health, and repeated endpoints, are ignored.
  // Control thread.
  void set_upstream(const std::string& name, const config::HealthCheckConfig& config,
                    std::vector<ProbeTarget> targets);
  // Stops probing every server of `name` (the upstream is gone or lost its [health] section); no
  // callback fires for them afterwards, even for a probe that was in flight. Control thread.
  void remove_upstream(const std::string& name);
  // Shutdown: stops everything and closes every probe connection. Control thread.
  void stop();

  // Servers being probed, across all upstreams.
  std::size_t server_count() const noexcept;

  // A verdict from another prober (fleet mode: the instance that holds the server's probe
  // lease): fed to the server's health and reported through the callbacks exactly as this
  // prober's own. False when `upstream` has no such server here. Control thread.
  bool apply_verdict(std::string_view upstream, std::string_view server, ProbeResult result);

  // Every transition a probe caused (the runtime logs and counts it). Control thread.
  std::function<void(const ProbeTarget&, const Transition&)> on_transition;
  // Every probe result, after it was fed to the server's health (metrics:
  // sluice_health_checks_total{result}). Control thread.
  std::function<void(const ProbeTarget&, const ProbeResult&)> on_probe;
  // Asked before each scheduled probe; false skips that slot (fleet mode: another instance
  // holds the server's probe lease and its verdicts come through apply_verdict). Unset: probe.
  std::function<bool(const ProbeTarget&)> may_probe;

private:
  struct Settings;  // one upstream's [health], parsed
  struct Server;    // one server's probe loop state
  struct Probe;     // one probe's exchange on a server's connection (probe_once's steps)

  void start(std::shared_ptr<Server> server);
  static void halt(Server& server) noexcept;
  boost::asio::awaitable<void> run(std::shared_ptr<Server> server);
  // One probe, timed out on `clock`; the result's latency is left to the caller (which reads the
  // clock).
  static boost::asio::awaitable<ProbeResult> probe_once(std::shared_ptr<Server> server,
                                                        const Clock& clock);
  // Times the current probe (`seq`) out once `clock` reaches server.deadline, waking after `wait`.
  static void arm_deadline(std::shared_ptr<Server> server, std::uint64_t seq, const Clock& clock,
                           Clock::duration wait);
  void report(Server& server, ProbeResult result);

  boost::asio::io_context& control_;
  const Clock& clock_;
  std::uint64_t seed_;
  std::map<std::string, std::vector<std::shared_ptr<Server>>, std::less<>> upstreams_;
  // Probe starts across every upstream, at most a few times the mean per 100 ms (no bursts).
  ProbePacer pacer_{std::chrono::milliseconds(100), 5};
  std::map<std::string, double, std::less<>> rates_;  // probes per second, by upstream
  void update_pacer();
};

}  // namespace sluice::health
