#include "sluice/telemetry/line_ring.hpp"

#include <algorithm>
#include <cstring>

#include "sluice/core/per_worker.hpp"

namespace sluice {

LineRing::LineRing(std::size_t capacity, std::size_t wake_at)
    : capacity_(std::max<std::size_t>(capacity, 1)),
      wake_at_(std::clamp<std::size_t>(wake_at, 1, capacity_)),
      data_(std::make_unique_for_overwrite<char[]>(capacity_)) {}

LineRing::Push LineRing::push(std::string_view line) noexcept {
  const std::uint64_t head = head_.load(std::memory_order_relaxed);
  if (capacity_ - (head - tail_seen_) < line.size()) {
    tail_seen_ = tail_.load(std::memory_order_acquire);  // the consumer may have made room
    if (capacity_ - (head - tail_seen_) < line.size()) {
      add_own<std::uint64_t>(dropped_);  // written by this worker only: no locked instruction
      return Push::dropped;
    }
  }
  const std::size_t at = head % capacity_;
  const std::size_t first = std::min(line.size(), capacity_ - at);
  std::memcpy(data_.get() + at, line.data(), first);
  std::memcpy(data_.get(), line.data() + first, line.size() - first);
  head_.store(head + line.size(), std::memory_order_release);

  const std::uint64_t now = head + line.size();
  // Past the mark by our stale view: look at the real tail (a cache miss once per batch drained).
  if (now - tail_seen_ >= wake_at_) tail_seen_ = tail_.load(std::memory_order_acquire);
  if (now - tail_seen_ < wake_at_) {
    woken_ = false;
    return Push::queued;
  }
  if (woken_) return Push::queued;
  woken_ = true;
  return Push::wake;
}

std::array<std::string_view, 2> LineRing::readable() const noexcept {
  const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
  const std::uint64_t head = head_.load(std::memory_order_acquire);  // the bytes before it are in
  const std::size_t n = static_cast<std::size_t>(head - tail);
  const std::size_t at = tail % capacity_;
  const std::size_t first = std::min(n, capacity_ - at);
  return {std::string_view(data_.get() + at, first), std::string_view(data_.get(), n - first)};
}

void LineRing::consume(std::size_t n) noexcept {
  tail_.store(tail_.load(std::memory_order_relaxed) + n, std::memory_order_release);
}

std::size_t LineRing::used() const noexcept {
  const std::uint64_t tail = tail_.load(std::memory_order_acquire);
  const std::uint64_t head = head_.load(std::memory_order_acquire);
  return head >= tail ? static_cast<std::size_t>(head - tail) : 0;
}

}  // namespace sluice
