#include "sluice/health/log.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sluice/telemetry/event_ring.hpp"

namespace sluice::health {

void log_transition(std::string_view upstream, const Endpoint& endpoint, const Transition& t) {
  // The dashboard's timeline shows the same words as the log (telemetry::events()); a refusal is
  // not a state change and repeats while the failure window stays full, so it stays in the log.
  if (t.event != HealthEvent::ejection_refused) {
    telemetry::events().push("health", upstream, endpoint.identity(),
                             fmt::format("{} -> {} ({}): {}", to_string(t.from), to_string(t.to),
                                         to_string(t.event), t.reason),
                             t.at);
  }
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
