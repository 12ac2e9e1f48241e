#pragma once
// The admin HTTP listener ([admin] listen): status, drain/undrain, reload, metrics and the
// Kubernetes probes, answered through an admin::Control (see docs/admin.md for every route).
//
//   GET  /api/status           200 application/json (Control::status_json)
//   POST /api/upstreams/{u}/servers/{s}/drain, .../undrain
//                              200 {"upstream","server","draining"} | 404 {"error"}
//   POST /api/reload           200 {"ok":true,"version":N} | 422 {"ok":false,"errors":[...]}
//   GET  /metrics              200 text/plain; version=0.0.4 (Control::metrics_text)
//   GET  /healthz              200 "ok"
//   GET  /readyz               200 "ready" | 503 "not ready" (Control::ready)
// An unknown path is 404, a known path with another method 405 with `Allow` (HEAD is allowed
// wherever GET is). Path segments are percent-decoded, so a server identity like
// "127.0.0.1:9001" may be sent as-is or as "127.0.0.1%3A9001".
//
//   GET  /, /dashboard         the dashboard page (dashboard.js, dashboard.css beside it)
//   GET  /api/dashboard?tick=N&event=M   200 application/json (Control::dashboard_json)
//
// Hardening (docs/admin.md): a `Host` other than localhost, an IP literal, the listen host or an
// allowed host is 421 (DNS rebinding); a POST whose Origin or Sec-Fetch-Site says another site is
// 403; with a non-empty token every POST needs `Authorization: Bearer <token>` (401), without
// one a POST needs `Content-Type: application/json` (415). Control is not called for a refused
// request. GETs need no token (the probes and Prometheus need no secret; status and metrics
// reveal topology, not control).
//
// Threads: runs on the CONTROL io_context; every method, and every Control call it makes, runs
// on that thread. Not a hot path: one Beast string_body request per exchange, bodies capped at
// 64 KiB, heads at 8 KiB. A request must be complete 5 s after its first byte (the first one 5 s
// after the connection opens); a keep-alive connection idle for 60 s is closed. At most 64 open
// connections, 16 per client address: beyond that the oldest connection waiting for a request is
// closed to make room, so idle connections cannot lock out /healthz.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "sluice/admin/control.hpp"
#include "sluice/config/config.hpp"

namespace sluice::admin {

class Server {
public:
  // `control_api` must outlive the server (until stop() or destruction). `token` = "" leaves
  // POSTs open (the config check allows that only on a loopback address).
  Server(boost::asio::io_context& control, const config::HostPort& listen, Control& control_api,
         std::string token);
  ~Server();  // stop()

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Resolves and binds the listen address (port 0 = an ephemeral port, see local_port()) and
  // starts accepting. Throws std::runtime_error when it cannot bind (a start-up error).
  // `inherited_fd` >= 0: accept on that listening socket (a binary upgrade passed it) instead.
  void start(int inherited_fd = -1);
  // Closes the acceptor and every connection; a request being answered gets no response. No
  // Control call happens afterwards. Idempotent. Control thread.
  void stop();
  // Closes the listener only; connections already open are answered (binary upgrade).
  void stop_accepting();

  // Replaces the token (e.g. the token file was re-read on reload); "" opens POSTs. Takes effect
  // for the next request. Control thread.
  void set_token(std::string token);
  // Host names accepted in `Host` besides localhost, IP literals and the listen host ([admin]
  // allowed_hosts). Takes effect for the next request. Control thread.
  void set_allowed_hosts(std::vector<std::string> hosts);

  // The bound port (after start()); 0 before.
  std::uint16_t local_port() const;
  // The listening socket, to pass to a new process on a binary upgrade.
  int listener_fd();

private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the connection coroutines, which may outlive us
};

// Reads an admin token file ([admin] token_file): the whole file with surrounding whitespace
// trimmed. Throws std::runtime_error ("cannot read admin token file 'F': No such file or
// directory", "admin token file 'F' is empty", "... contains control characters") so that the
// runtime can refuse to start and the CLI can report it.
std::string read_token_file(const std::string& path);

// Constant-time comparison of a presented secret with the expected one: the time depends only
// on the lengths, not on where the first difference is.
bool secret_equals(std::string_view presented, std::string_view expected);

}  // namespace sluice::admin
