#include "sluice/health/log.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sluice/telemetry/event_ring.hpp"

namespace sluice::health {

void log_transition(std::string_view upstream, const Endpoint& endpoint, const Transition& t) {
  // Failure notices and refused ejections repeat while a server keeps failing: one line per
  // server per second, with the count held back (the refusals are counted in
  // sluice_ejections_refused_total). State changes are always written.
  const bool repetitive = t.event == HealthEvent::failure_noted || t.event == HealthEvent::ejection_refused;
  // The dashboard's timeline (telemetry::events()) shows state changes in the log's words; the
  // repetitive notices stay in the log only.
  if (!repetitive) {
    telemetry::events().push("health", upstream, endpoint.identity(),
                             fmt::format("{} -> {} ({}): {}", to_string(t.from), to_string(t.to),
                                         to_string(t.event), t.reason),
                             t.at);
  }
  std::uint32_t held_back = 0;
  if (repetitive && endpoint.has_health() && !endpoint.health().log_limit(t.event).admit(t.at, held_back))
    return;
  const auto level = t.event == HealthEvent::failure_noted ? spdlog::level::info
                     : t.event == HealthEvent::ejection_refused ? spdlog::level::warn
                     : (t.to == ServerState::up || t.to == ServerState::slow_start)
                         ? spdlog::level::info
                         : spdlog::level::warn;
  if (held_back != 0) {
    spdlog::log(level, "upstream {} server {}: {} -> {} ({}): {} ({} more like it in the last second)",
                upstream, endpoint.identity(), to_string(t.from), to_string(t.to), to_string(t.event),
                t.reason, held_back);
    return;
  }
  spdlog::log(level, "upstream {} server {}: {} -> {} ({}): {}", upstream, endpoint.identity(),
              to_string(t.from), to_string(t.to), to_string(t.event), t.reason);
}

}  // namespace sluice::health
