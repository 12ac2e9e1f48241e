#pragma once
// One log line per health transition: server, old -> new state, and the reason. Used by the
// workers (passive results) and the control thread (probes, ticks); spdlog is thread-safe.
#include <string_view>

#include "sluice/health/server_health.hpp"

namespace sluice::health {

void log_transition(std::string_view upstream, const Endpoint& endpoint, const Transition& t);

}  // namespace sluice::health
