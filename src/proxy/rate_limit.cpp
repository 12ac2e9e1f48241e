#include "sluice/proxy/rate_limit.hpp"

#include <algorithm>
#include <bit>

namespace sluice::proxy {

namespace {

constexpr std::uint32_t empty_slot = 0xffffffffu;

}  // namespace

RateLimiter::RateLimiter(const Settings& settings)
    : settings_(settings),
      per_shard_(std::max<std::size_t>(1, (settings.max_keys + shard_count - 1) / shard_count)),
      shards_(std::make_unique<Shard[]>(shard_count)) {
  settings_.burst = std::max<std::uint32_t>(1, settings_.burst);
  // The index is at most half full, so that probe sequences stay short.
  const std::size_t slots = std::bit_ceil(per_shard_ * 2);
  for (std::size_t i = 0; i < shard_count; ++i) {
    shards_[i].entries.resize(per_shard_);
    shards_[i].index.assign(slots, empty_slot);
  }
}

// The slot holding `key`, or the empty slot where it would go.
std::size_t RateLimiter::Shard::find_slot(std::uint64_t key) const noexcept {
  const std::size_t mask = index.size() - 1;
  for (std::size_t s = key & mask;; s = (s + 1) & mask)
    if (index[s] == empty_slot || entries[index[s]].key == key) return s;
}

// Linear-probing deletion without tombstones (Knuth's Algorithm R): later entries of the probe
// run move back into the hole when their home slot is not between the hole and them.
void RateLimiter::Shard::erase_slot(std::size_t hole) noexcept {
  const std::size_t mask = index.size() - 1;
  for (std::size_t j = (hole + 1) & mask; index[j] != empty_slot; j = (j + 1) & mask) {
    const std::size_t home = entries[index[j]].key & mask;
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    index[hole] = index[j];
    hole = j;
  }
  index[hole] = empty_slot;
}

void RateLimiter::Shard::unlink(std::uint32_t e) noexcept {
  auto& x = entries[e];
  (x.prev == none ? head : entries[x.prev].next) = x.next;
  (x.next == none ? tail : entries[x.next].prev) = x.prev;
  x.prev = x.next = none;
}

void RateLimiter::Shard::push_front(std::uint32_t e) noexcept {
  entries[e].prev = none;
  entries[e].next = head;
  if (head != none) entries[head].prev = e;
  head = e;
  if (tail == none) tail = e;
}

// The entry of `key`, made most recently seen; a new key takes a free entry or the least
// recently seen one's, starting as a full bucket (tat = now).
std::uint32_t RateLimiter::Shard::obtain(std::uint64_t key, Clock::duration::rep now,
                                         std::uint32_t limit) noexcept {
  std::size_t slot = find_slot(key);
  std::uint32_t e = index[slot];
  if (e != empty_slot) {
    unlink(e);
    push_front(e);
    return e;
  }
  if (used < limit) {
    e = used++;
  } else {
    e = tail;
    erase_slot(find_slot(entries[e].key));
    unlink(e);
    slot = find_slot(key);  // the erase may have moved entries of this key's probe run
  }
  entries[e].key = key;
  entries[e].tat = now;
  index[slot] = e;
  push_front(e);
  return e;
}

RateLimiter::Decision RateLimiter::take(std::uint64_t key, Clock::time_point now) noexcept {
  const auto t = now.time_since_epoch().count();
  const auto interval = settings_.interval.count();
  const auto tau = interval * static_cast<Clock::duration::rep>(settings_.burst);
  // The top bits pick the shard, the low ones the slot: independent for a well-mixed hash.
  Shard& shard = shards_[key >> 60 & (shard_count - 1)];
  std::lock_guard guard(shard.lock);
  auto& entry = shard.entries[shard.obtain(key, t, static_cast<std::uint32_t>(per_shard_))];
  const auto next = std::max(entry.tat, t) + interval;
  if (next - t > tau) return {false, Clock::duration(next - tau - t)};
  entry.tat = next;
  return {};
}

std::size_t RateLimiter::size() const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < shard_count; ++i) {
    std::lock_guard guard(shards_[i].lock);
    n += shards_[i].used;
  }
  return n;
}

}  // namespace sluice::proxy
