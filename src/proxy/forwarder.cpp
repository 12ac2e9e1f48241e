#include "sluice/proxy/forwarder.hpp"

#include <charconv>

namespace sluice::proxy {

AttemptWindow AttemptWindow::of(const config::UpstreamConfig& u, Clock::time_point started) noexcept {
  const auto& retry = u.retry;
  const Clock::duration per_try =
      retry.per_try_timeout.count() != 0 ? retry.per_try_timeout : u.response_timeout;
  const Clock::duration whole =
      retry.deadline.count() != 0 ? Clock::duration(retry.deadline) : per_try * retry.attempts;
  return {per_try, started + whole};
}

bool retry_after_exceeds(std::string_view after, Clock::time_point now,
                         Clock::time_point deadline) noexcept {
  unsigned long seconds = 0;
  const auto r = std::from_chars(after.data(), after.data() + after.size(), seconds);
  return !after.empty() && r.ec == std::errc() && now + std::chrono::seconds(seconds) > deadline;
}

Clock::duration pooled_idle_time(Clock::duration keepalive_timeout,
                                 std::optional<std::chrono::seconds> origin) noexcept {
  if (!origin) return keepalive_timeout;
  const auto n = *origin;
  return std::min<Clock::duration>(keepalive_timeout,
                                   n > std::chrono::seconds(2) ? n - std::chrono::seconds(1) : n / 2);
}

}  // namespace sluice::proxy
