#include "worker.hpp"

#include <algorithm>

namespace sluice::origin {

worker::worker(origin_state& state, std::optional<std::chrono::milliseconds> idle_timeout)
    : state_(state),
      idle_timeout_(idle_timeout),
      work_(context_.get_executor()),
      sweep_timer_(context_) {}

void worker::run() {
  if (idle_timeout_) schedule_sweep();
  context_.run();
}

void worker::stop() { context_.stop(); }

void worker::schedule_sweep() {
  // One timer per worker instead of one per connection: arming and cancelling a timer around
  // every read would cost more than the whole request. An idle connection is closed at most one
  // period late: an eighth of the timeout, kept within [5 ms, 1 s].
  const auto period =
      std::clamp(*idle_timeout_ / 8, std::chrono::milliseconds(5), std::chrono::milliseconds(1000));
  sweep_timer_.expires_after(period);
  sweep_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    const auto cutoff = connection::clock::now() - *idle_timeout_;
    for (auto& c : connections_) c.close_if_idle_since(cutoff);
    schedule_sweep();
  });
}

}  // namespace sluice::origin
