#include "sluice/health/log.hpp"

#include <spdlog/spdlog.h>

namespace sluice::health {

void log_transition(std::string_view upstream, const Endpoint& endpoint, const Transition& t) {
  // Refusals repeat while the failure window stays full: a warning, but only at debug after the
  // first, which the guard's counter keeps for metrics.
  const auto level = t.event == HealthEvent::ejection_refused ? spdlog::level::warn
                     : (t.to == ServerState::up || t.to == ServerState::slow_start)
                         ? spdlog::level::info
                         : spdlog::level::warn;
  spdlog::log(level, "upstream {} server {}: {} -> {} ({}): {}", upstream, endpoint.identity(),
              to_string(t.from), to_string(t.to), to_string(t.event), t.reason);
}

}  // namespace sluice::health
