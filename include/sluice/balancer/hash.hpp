#pragma once
// Consistent hashing: a request key always goes to the same server while that server can take
// it, and a change of membership moves only the keys of the server that left or came.
//
// The ring (Karger et al.; ketama's layout): each server owns points on a 32-bit ring, derived
// from hash(identity) only - never from its list position - so reordering the list moves no key
// and every sluice instance built from the same config maps every key identically. A key goes
// to the owner of the first point at or after hash(key). Removing a server removes only its
// points, so only its keys move (each to the next server on the ring); adding it back restores
// the old mapping exactly. Maglev was the alternative: O(1) lookups and perfect balance, but a
// rebuild also shifts a few keys between servers that stayed, which breaks "only its keys".
//
// Points per server are proportional to its configured weight (clamped to 1..1000, read at build
// time; the slow-start share is ignored, since ramping a server's points would move keys): at
// most 1,024 per weight unit and ~65,536 in all (at least 1 per server). 1,024 points give each
// server's share a relative standard deviation of ~3% (10 servers: busiest ~1.05 x mean). A
// lookup is O(1): a bucket table indexed by the key's top bits gives the first point of its
// bucket, and there is about one point per bucket.
//
// Fallbacks: when the key's server is skipped (tried, unavailable, at max_conns), the next
// distinct server clockwise is the next candidate - deterministic for a key, and the skipped
// server's keys spread over the others in proportion to their ring share.
//
// Bounded loads (Mirrokni, Thorup, Zadimoghaddam, "Consistent Hashing with Bounded Loads"):
// with balance_factor c > 0, a server is a candidate only if
//   in_flight + 1 <= ceil(c * (total_in_flight + 1) / n_available),
// so a hot key spills to its next candidates instead of piling onto one server. If no server
// passes the bound (the only ones left are over it), the key's first non-skipped candidate is
// used. The totals: up to `exact_totals_limit` servers each keyed pick sums them all. Above it
// that O(n) sum costs too much (~1.5 us at 1,000 servers), so the servers are cut into windows
// of `totals_window` and each pick re-sums one window (rotating) and applies the difference to
// running totals. Each worker keeps its own windows and totals (PerWorker: no cache line written
// by every worker on every keyed pick), so they lag the truth by at most ceil(n / 16) of that
// worker's picks' worth of changes. A lagging total under rising load gives a lower, i.e.
// stricter, bound.
//
// Without a key (has_hash false) the policy is round robin (a cursor per worker).
//
// Threading: pick() from any thread, concurrently; the ring is immutable after construction, and
// a pick writes only its worker's own totals and cursor.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "sluice/balancer/balancer.hpp"
#include "sluice/balancer/round_robin.hpp"
#include "sluice/core/per_worker.hpp"

namespace sluice {

// The hash of a request key (client ip, URI, header or cookie value, query parameter) for
// PickContext::hash. wyhash's construction (Wang Yi; its constants and multiply-fold mixing,
// without the three-lane loop for keys over 48 bytes): fast, well distributed and the same on
// every platform and build (std::hash is not), since every instance must map keys identically.
// Pinned by tests: changing it remaps every key.
std::uint64_t hash_key_bytes(std::string_view key) noexcept;

// A 64-bit finalizer (splitmix64's): spreads any integer, e.g. a counter, over all 64 bits.
std::uint64_t hash_mix64(std::uint64_t x) noexcept;

class ConsistentHash final : public Balancer {
public:
  static constexpr std::uint32_t max_points_per_weight = 1024;
  static constexpr std::uint32_t target_points = 65536;
  static constexpr std::size_t exact_totals_limit = 32;
  static constexpr std::size_t totals_window = 16;

  explicit ConsistentHash(std::span<Endpoint* const> endpoints, double balance_factor = 0,
                          unsigned workers = default_worker_slots);
  Pick pick(const PickContext& ctx) override;

  // Distinct servers (list indices) in the order the ring offers them for `hash`: the first
  // choice, then the fallbacks - whatever their state. For tests and diagnostics (allocates).
  std::vector<std::uint32_t> candidates(std::uint64_t hash) const;
  std::size_t ring_size() const noexcept { return point_position_.size(); }

private:
  void build_ring();
  void build_window_totals(unsigned workers);
  void build_buckets();
  std::uint32_t first_point(std::uint64_t hash) const noexcept;
  // Calls accept(index) for each distinct server clockwise from `point` until it returns true;
  // returns that index or npos after every server was offered.
  template <class Accept>
  std::uint32_t walk(std::uint32_t point, Accept&& accept) const;

  struct Totals {
    std::int64_t in_flight = 0;
    std::int64_t available = 0;
  };
  Totals sum(std::size_t first, std::size_t last) const noexcept;
  Totals totals(unsigned worker) noexcept;  // for bounded loads

  std::span<Endpoint* const> endpoints_;
  double balance_factor_ = 0;
  std::vector<std::uint32_t> point_position_;  // sorted
  std::vector<std::uint32_t> point_owner_;     // endpoint index of each point
  std::vector<std::uint32_t> bucket_first_;    // first point at or after each bucket's start
  unsigned bucket_shift_ = 32;
  RoundRobin unkeyed_;

  // Windowed running totals (bounded loads, more than exact_totals_limit servers), one set per
  // worker, written by that worker only. Atomics so that the rare shared slot (more workers than
  // slots) is still race-free.
  struct WorkerTotals {
    std::unique_ptr<std::atomic<std::int64_t>[]> window_in_flight;
    std::unique_ptr<std::atomic<std::int64_t>[]> window_available;
    std::atomic<std::int64_t> in_flight{0};
    std::atomic<std::int64_t> available{0};
    std::atomic<std::uint64_t> cursor{0};  // the next window to re-sum
  };
  std::size_t windows_ = 0;
  std::unique_ptr<PerWorker<WorkerTotals>> totals_;  // only with windows
};

}  // namespace sluice
