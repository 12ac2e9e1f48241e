#include "sluice/health/passive_window.hpp"

namespace sluice::health {

PassiveWindow::PassiveWindow(unsigned max_fails, Clock::duration fail_timeout)
    : ring_(max_fails), fail_timeout_(fail_timeout) {}

bool PassiveWindow::record(Clock::time_point now) {
  if (ring_.empty()) return false;
  ring_[next_] = now;
  next_ = (next_ + 1) % ring_.size();
  if (size_ < ring_.size()) ++size_;
  // When full, next_ is the oldest of the last max_fails failures.
  return size_ == ring_.size() && now - ring_[next_] <= fail_timeout_;
}

unsigned PassiveWindow::count(Clock::time_point now) const noexcept {
  unsigned n = 0;
  for (std::size_t i = 0; i < size_; ++i) {
    const auto slot = (next_ + ring_.size() - 1 - i) % ring_.size();  // newest first
    if (now - ring_[slot] > fail_timeout_) break;
    ++n;
  }
  return n;
}

}  // namespace sluice::health
