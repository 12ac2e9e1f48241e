#pragma once
// What a reload would change: `sluice check --config NEW --diff OLD`. Servers added, removed,
// reweighted, drained or un-drained, upstreams added or removed, routes changed, and for hash
// upstreams the share of keys that would move to another server. Control plane only.
#include <string>
#include <vector>

#include "sluice/config/config.hpp"

namespace sluice {

// One line per change, in file order of the new config; empty when nothing changes.
std::vector<std::string> config_diff(const config::Config& old_config, const config::Config& new_config);

// Share (0..1) of `samples` request keys that a hash upstream would send to another server after
// the change. Keys are deterministic, so the figure is repeatable.
double hash_moved_share(const config::UpstreamConfig& old_upstream,
                        const config::UpstreamConfig& new_upstream, unsigned samples = 100000);

}  // namespace sluice
