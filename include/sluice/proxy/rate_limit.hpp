#pragma once
// A per-key token bucket shared by every worker (a client's connections land on any worker, so
// per-worker buckets would multiply its allowance by the worker count).
//
// Each key holds one time point, GCRA style: its "theoretical arrival time" (tat). A bucket of
// `burst` tokens refilled at one token per `interval` allows a request at `now` when
// max(tat, now) + interval - now <= burst x interval; a key whose tat is in the past is a full
// bucket, the same as a key never seen, which is why evicting idle keys loses nothing.
//
// Memory is bounded and allocated once: max_keys entries (24 bytes each, plus an 8-byte index
// slot per key) in `shard_count` shards, each with its own lock (taken only by requests of a
// rate-limited route, for a few dozen instructions) and its own LRU list; a new key in a full
// shard evicts that shard's least recently seen key. Keys are 64-bit hashes.
// Thread-safe: take() from any worker.
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "sluice/core/clock.hpp"

namespace sluice::proxy {

class RateLimiter {
public:
  struct Settings {
    Clock::duration interval{std::chrono::milliseconds(10)};  // one token per interval
    std::uint32_t burst = 100;                                // bucket size, >= 1
    std::size_t max_keys = 65536;                             // across all shards
  };
  struct Decision {
    bool allowed = true;
    Clock::duration retry_after{0};  // when refused: until a token is back
  };
  static constexpr std::size_t shard_count = 16;

  explicit RateLimiter(const Settings& settings);

  Decision take(std::uint64_t key, Clock::time_point now) noexcept;

  std::size_t size() const;  // keys held, all shards (tests, status)
  std::size_t capacity() const noexcept { return per_shard_ * shard_count; }
  const Settings& settings() const noexcept { return settings_; }

private:
  static constexpr std::uint32_t none = 0xffffffffu;
  struct Entry {
    std::uint64_t key = 0;
    Clock::duration::rep tat = 0;
    std::uint32_t prev = none;  // towards the most recently seen
    std::uint32_t next = none;  // towards the least recently seen
  };
  struct alignas(64) Shard {
    mutable std::mutex lock;
    std::vector<Entry> entries;     // the first `used` are live
    std::vector<std::uint32_t> index;  // open addressing (linear probing) into entries
    std::uint32_t used = 0;
    std::uint32_t head = none;  // most recently seen
    std::uint32_t tail = none;  // least recently seen

    std::size_t find_slot(std::uint64_t key) const noexcept;
    void erase_slot(std::size_t slot) noexcept;
    void unlink(std::uint32_t e) noexcept;
    void push_front(std::uint32_t e) noexcept;
    std::uint32_t obtain(std::uint64_t key, Clock::duration::rep now, std::uint32_t limit) noexcept;
  };

  Settings settings_;
  std::size_t per_shard_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace sluice::proxy
