#pragma once
// The balancing policy interface. A policy chooses among an upstream's endpoints; calling pick()
// again with the previous choice added to `tried` yields the next fallback, so retry-to-another-
// server is built into every policy (Pingora's "first choice, then fallbacks").
//
// Threading: one Balancer per upstream per config snapshot, shared by all workers. pick() is
// called concurrently from every worker and must be lock-free; it reads endpoint atomics and
// writes only the calling worker's own state (PickContext::worker's slot of a PerWorker, see
// core/per_worker.hpp): no cache line is written by every worker on every request.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace sluice {

class Endpoint;

// Servers a request already tried, by position in the upstream's endpoint list. Attempts are
// bounded, so a small inline array is enough and never allocates.
class TriedSet {
public:
  static constexpr std::size_t capacity = 16;
  bool contains(std::uint32_t index) const noexcept {
    for (std::size_t i = 0; i < size_; ++i)
      if (items_[i] == index) return true;
    return false;
  }
  void add(std::uint32_t index) noexcept {
    if (size_ < capacity && !contains(index)) items_[size_++] = index;
  }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::span<const std::uint32_t> items() const noexcept { return {items_.data(), size_}; }

private:
  std::array<std::uint32_t, capacity> items_{};
  std::size_t size_ = 0;
};

struct PickContext {
  const TriedSet* tried = nullptr;  // may be null: nothing tried yet
  std::uint64_t hash = 0;           // request key hash, for hashing policies
  bool has_hash = false;
  // when_all_down = "panic": health (down, ejected) is ignored; draining, max_conns and tried
  // still count.
  bool panic = false;
  // The calling worker's index (WorkerContext::index): whose cursor the pick moves.
  unsigned worker = 0;
};

// Index of the chosen endpoint in the upstream's list, or npos when none is available.
struct Pick {
  static constexpr std::uint32_t npos = UINT32_MAX;
  std::uint32_t index = npos;
  explicit operator bool() const noexcept { return index != npos; }
};

class Balancer {
public:
  virtual ~Balancer() = default;
  virtual Pick pick(const PickContext& ctx) = 0;
};

// A retry (something already tried) picks from the current position without taking a turn:
// otherwise every retry would also skip the next request's first choice, and with one bad server
// of two, every first try would land on the bad one.
inline bool is_retry(const PickContext& ctx) noexcept { return ctx.tried != nullptr && !ctx.tried->empty(); }

// True when `tried` excludes the endpoint at `index`, the endpoint is not available (down,
// ejected, draining) or it is at its max_conns cap. Every policy filters its choice with this.
bool skip(const Endpoint& endpoint, std::uint32_t index, const PickContext& ctx) noexcept;

}  // namespace sluice
