#pragma once
// Binary upgrade (`sluice upgrade`, SIGUSR2): start a new sluice that inherits the listening
// sockets, and learn whether it came up. The new process gets the sockets as descriptors 3..
// with LISTEN_FDS / LISTEN_PID / LISTEN_FDNAMES (sd_listen_fds(3), the same path as systemd
// socket activation, so it binds nothing), and a pipe in SLUICE_UPGRADE_READY_FD on which it
// writes one line once it accepts (runtime.cpp, notify_ready). The old process stops accepting
// only after that line; until then, and if it never comes, the old process serves as before.
// What the old process knows about its servers (drains, probe verdicts, ejections, slow-start
// progress: the state file's text, state_file.hpp) goes along in a memfd named by
// SLUICE_UPGRADE_STATE_FD, so that an upgrade forgets nothing, with or without a state file.
//
// Control thread. spawn_upgrade blocks until the new process is ready, exits, or `timeout`
// passes (then it is killed): the workers keep serving meanwhile, the control loop waits.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

struct PassedSocket {
  int fd;
  std::string name;  // LISTEN_FDNAMES entry
};

struct UpgradeResult {
  bool ok = false;
  long pid = 0;        // the new process (ok)
  std::string error;   // why not (not ok)
};

UpgradeResult spawn_upgrade(const std::string& binary, const std::vector<std::string>& args,
                            const std::vector<PassedSocket>& sockets, std::string_view state,
                            std::chrono::milliseconds timeout);

// In the new process: the state the old one handed over (nullopt when not started by an upgrade,
// or an old binary that hands none). Reads, closes and unsets SLUICE_UPGRADE_STATE_FD.
std::optional<std::string> take_upgrade_state();

// In the new process: tells the old one it accepts (no-op when not started by an upgrade).
// Reads and unsets SLUICE_UPGRADE_READY_FD the first time.
void report_upgrade_ready();

// The running binary's path, read once at start-up (before a package upgrade replaces it).
std::string own_binary();

}  // namespace sluice
