#pragma once
// What a reload would change: `sluice check --config NEW --diff OLD`. Every key whose effective
// value changes (old -> new, restart-only keys marked), servers added, removed, reweighted,
// drained or un-drained (compared by identity), upstreams added or removed, routes changed, and
// for hash upstreams the share of keys that would move to another server. Control plane only.
#include <string>
#include <vector>

#include "sluice/config/config.hpp"
#include "sluice/config/loader.hpp"

namespace sluice {

// One line per change, in file order of the new config; empty when nothing changes.
std::vector<std::string> config_diff(const config::Config& old_config, const config::Config& new_config);

// The restart-only keys (config::Reload::restart) whose value `file` changes from `running`: one
// error each, at the key in the file: "FILE:LINE:COL: server.workers: changing this needs a
// restart (running: 2, file: 1)". A reload with any of them is refused whole.
std::vector<config::ConfigError> restart_changes(const config::Config& running, const config::Config& file);

// A server as the running process reports it (GET /api/status).
struct RunningServer {
  std::string upstream;
  std::string server;  // identity
  bool draining = false;
};

// `check --diff-running`: where the running drain state differs from the running config's
// `drain` (set or lifted through the API), what the reload to `file` does with it. A drain set
// through the API survives a reload unless the file changes that server's `drain`.
std::vector<std::string> running_drain_diff(const config::Config& running, const config::Config& file,
                                            const std::vector<RunningServer>& servers);

// Share (0..1) of `samples` request keys that a hash upstream would send to another server after
// the change. Keys are deterministic, so the figure is repeatable.
double hash_moved_share(const config::UpstreamConfig& old_upstream,
                        const config::UpstreamConfig& new_upstream, unsigned samples = 100000);

}  // namespace sluice
