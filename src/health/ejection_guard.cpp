#include "sluice/health/ejection_guard.hpp"

#include <algorithm>

namespace sluice::health {

EjectionGuard::EjectionGuard(std::uint32_t pool_size, std::uint32_t max_ejected_percent) noexcept
    : pool_size_(pool_size), max_percent_(std::min<std::uint32_t>(max_ejected_percent, 100)) {}

std::uint32_t EjectionGuard::capacity() const noexcept {
  return static_cast<std::uint32_t>(std::uint64_t{pool_size()} * max_percent() / 100);
}

EjectionGuard::Verdict EjectionGuard::try_eject() noexcept {
  const auto cap = capacity();
  auto current = ejected_.load(std::memory_order_acquire);
  // CAS, not fetch_add-then-check: two workers ejecting at once must not both slip under the cap.
  while (current + 1 <= cap) {
    if (ejected_.compare_exchange_weak(current, current + 1, std::memory_order_acq_rel)) {
      return {true, current + 1, pool_size(), max_percent()};
    }
  }
  refusals_.fetch_add(1, std::memory_order_relaxed);
  return {false, current + 1, pool_size(), max_percent()};
}

void EjectionGuard::release() noexcept {
  auto current = ejected_.load(std::memory_order_acquire);
  while (current > 0 &&
         !ejected_.compare_exchange_weak(current, current - 1, std::memory_order_acq_rel)) {
  }
}

void EjectionGuard::reconfigure(std::uint32_t pool_size, std::uint32_t max_ejected_percent) noexcept {
  pool_size_.store(pool_size, std::memory_order_relaxed);
  max_percent_.store(std::min<std::uint32_t>(max_ejected_percent, 100), std::memory_order_relaxed);
}

}  // namespace sluice::health
