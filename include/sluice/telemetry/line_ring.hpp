#pragma once
// One worker's access-log lines on their way to the writing thread: a fixed ring of bytes,
// allocated once, with one producer (the worker) and one consumer (the log thread). A line goes
// in whole or not at all; bytes come out in the order they went in, as at most two spans (the
// ring wraps), so that the consumer writes a whole batch with one writev().
//
// Nothing here blocks or allocates. The producer writes its own head (a release store) and reads
// the consumer's tail only when its cached copy says the ring is too full; the consumer writes the
// tail once per batch. A line that does not fit is dropped and counted: the worker never waits
// for the disk (HAProxy's choice for its log rings; nginx would block the worker on write()).
//
// Threading: push() on the producer thread only; readable()/consume() on the consumer thread
// only; dropped() and used() from any thread.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace sluice {

class LineRing {
public:
  // `capacity` bytes (at least 1), not zeroed: pages become resident as lines reach them. `wake_at`: push() reports when the bytes waiting reach it.
  LineRing(std::size_t capacity, std::size_t wake_at);
  LineRing(const LineRing&) = delete;
  LineRing& operator=(const LineRing&) = delete;

  enum class Push { queued, wake, dropped };
  // Copies `line` in whole, or drops it (counted) when it does not fit. `wake` = queued, and
  // the ring has just reached `wake_at` bytes waiting: the caller should wake the consumer
  // (once per crossing, not once per line).
  Push push(std::string_view line) noexcept;

  // Consumer: the bytes waiting, oldest first (the second span is empty unless the ring wraps).
  std::array<std::string_view, 2> readable() const noexcept;
  // Consumer: the first `n` bytes of readable() are done with (written, or lost on a write error).
  void consume(std::size_t n) noexcept;

  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  std::size_t used() const noexcept;
  std::size_t capacity() const noexcept { return capacity_; }

private:
  const std::size_t capacity_;
  const std::size_t wake_at_;
  const std::unique_ptr<char[]> data_;
  // Producer's line: its head, its view of the tail, whether it asked for a wake-up already.
  alignas(64) std::atomic<std::uint64_t> head_{0};
  std::uint64_t tail_seen_ = 0;
  bool woken_ = false;
  std::atomic<std::uint64_t> dropped_{0};
  // Consumer's line.
  alignas(64) std::atomic<std::uint64_t> tail_{0};
};

}  // namespace sluice
