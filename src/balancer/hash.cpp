#include "sluice/balancer/hash.hpp"
#include "sluice/balancer/registry.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "sluice/endpoint/endpoint.hpp"

namespace sluice {

namespace {

// wyhash's constants and its multiply-fold mixing step (Wang Yi, public domain).
constexpr std::uint64_t p0 = 0xa0761d6478bd642full;
constexpr std::uint64_t p1 = 0xe7037ed1a0b428dbull;

std::uint64_t mum(std::uint64_t a, std::uint64_t b) noexcept {
  const auto r = static_cast<unsigned __int128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}

// Little-endian reads, so that the hash is the same on every platform.
std::uint64_t read64(const unsigned char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}
std::uint64_t read32(const unsigned char* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

constexpr std::uint64_t golden = 0x9e3779b97f4a7c15ull;

}  // namespace

std::uint64_t hash_key_bytes(std::string_view key) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(key.data());
  const std::size_t len = key.size();
  std::uint64_t seed = mum(p0, p1);
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  if (len <= 16) {
    if (len >= 4) {
      const std::size_t mid = (len >> 3) << 2;  // 0 or 4: overlapping reads cover 4..16 bytes
      a = (read32(p) << 32) | read32(p + mid);
      b = (read32(p + len - 4) << 32) | read32(p + len - 4 - mid);
    } else if (len > 0) {
      a = (std::uint64_t{p[0]} << 16) | (std::uint64_t{p[len >> 1]} << 8) | p[len - 1];
    }
  } else {
    std::size_t left = len;
    while (left > 16) {
      seed = mum(read64(p) ^ p1, read64(p + 8) ^ seed);
      p += 16;
      left -= 16;
    }
    a = read64(p + left - 16);
    b = read64(p + left - 8);
  }
  const auto r = static_cast<unsigned __int128>(a ^ p1) * (b ^ seed);
  return mum(static_cast<std::uint64_t>(r) ^ p0 ^ len, static_cast<std::uint64_t>(r >> 64) ^ p1);
}

std::uint64_t hash_mix64(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

ConsistentHash::ConsistentHash(std::span<Endpoint* const> endpoints, double balance_factor,
                               unsigned workers)
    : endpoints_(endpoints), balance_factor_(balance_factor), unkeyed_(endpoints, workers) {
  if (endpoints_.empty()) return;
  build_ring();
  if (balance_factor_ > 0 && endpoints_.size() > exact_totals_limit) build_window_totals(workers);
  build_buckets();
}

// Each server's points (about target_points in all, by weight) on the 32-bit ring, sorted.
void ConsistentHash::build_ring() {
  const auto n = endpoints_.size();
  std::vector<std::uint32_t> weights(n);
  double total_weight = 0;
  for (std::size_t i = 0; i < n; ++i) {
    weights[i] = std::clamp<std::uint32_t>(endpoints_[i]->weight(), 1, 1000);
    total_weight += weights[i];
  }
  const double per_weight =
      std::min<double>(max_points_per_weight, static_cast<double>(target_points) / total_weight);

  struct Point {
    std::uint32_t position;
    std::uint32_t owner;
  };
  std::vector<Point> points;
  for (std::uint32_t i = 0; i < n; ++i) {
    const auto count = std::max<long long>(1, std::llround(weights[i] * per_weight));
    const auto base = hash_key_bytes(endpoints_[i]->identity());
    for (long long j = 1; j <= count; ++j)
      points.push_back({static_cast<std::uint32_t>(hash_mix64(base + j * golden) >> 32), i});
  }
  // Ties (two servers on one position) are settled by identity, never by list position.
  std::sort(points.begin(), points.end(), [&](const Point& x, const Point& y) {
    if (x.position != y.position) return x.position < y.position;
    const auto& ix = endpoints_[x.owner]->identity();
    const auto& iy = endpoints_[y.owner]->identity();
    return ix != iy ? ix < iy : x.owner < y.owner;
  });
  point_position_.reserve(points.size());
  point_owner_.reserve(points.size());
  for (const auto& p : points) {
    point_position_.push_back(p.position);
    point_owner_.push_back(p.owner);
  }
}

// Bounded loads over many servers: running totals per window of totals_window servers, one set
// per worker, each starting from the servers' counts now.
void ConsistentHash::build_window_totals(unsigned workers) {
  const auto n = endpoints_.size();
  windows_ = (n + totals_window - 1) / totals_window;
  totals_ = std::make_unique<PerWorker<WorkerTotals>>(workers);
  std::vector<Totals> start(windows_);
  Totals all;
  for (std::size_t w = 0; w < windows_; ++w) {
    start[w] = sum(w * totals_window, std::min(n, (w + 1) * totals_window));
    all.in_flight += start[w].in_flight;
    all.available += start[w].available;
  }
  totals_->for_each([&](WorkerTotals& t) {
    t.window_in_flight = std::make_unique<std::atomic<std::int64_t>[]>(windows_);
    t.window_available = std::make_unique<std::atomic<std::int64_t>[]>(windows_);
    for (std::size_t w = 0; w < windows_; ++w) {
      t.window_in_flight[w].store(start[w].in_flight, std::memory_order_relaxed);
      t.window_available[w].store(start[w].available, std::memory_order_relaxed);
    }
    t.in_flight.store(all.in_flight, std::memory_order_relaxed);
    t.available.store(all.available, std::memory_order_relaxed);
  });
}

// About one point per bucket: 2^bits buckets over the 32-bit ring, each naming its first point.
void ConsistentHash::build_buckets() {
  const auto bits =
      std::clamp<unsigned>(static_cast<unsigned>(std::bit_width(point_position_.size() - 1)), 1, 24);
  bucket_shift_ = 32 - bits;
  bucket_first_.resize(std::size_t{1} << bits);
  std::uint32_t next = 0;
  for (std::size_t b = 0; b < bucket_first_.size(); ++b) {
    const std::uint64_t start = std::uint64_t{b} << bucket_shift_;
    while (next < point_position_.size() && point_position_[next] < start) ++next;
    bucket_first_[b] = next;
  }
}

std::uint32_t ConsistentHash::first_point(std::uint64_t hash) const noexcept {
  // Remixed so that a weak key hash (a raw address, a counter) still spreads over the ring.
  const auto key = static_cast<std::uint32_t>(hash_mix64(hash) >> 32);
  const auto size = static_cast<std::uint32_t>(point_position_.size());
  auto i = bucket_first_[key >> bucket_shift_];
  while (i < size && point_position_[i] < key) ++i;
  return i == size ? 0 : i;
}

template <class Accept>
std::uint32_t ConsistentHash::walk(std::uint32_t point, Accept&& accept) const {
  const auto first = point_owner_[point];
  if (accept(first)) return first;
  const auto n = endpoints_.size();
  if (n == 1) return Pick::npos;

  // Servers already offered: on the stack up to 4,096 servers (the common case by far).
  constexpr std::size_t inline_words = 64;
  const auto words = (n + 63) / 64;
  std::array<std::uint64_t, inline_words> inline_seen;
  std::vector<std::uint64_t> heap_seen;
  std::uint64_t* seen = inline_seen.data();
  if (words > inline_words) {
    heap_seen.resize(words);
    seen = heap_seen.data();
  } else {
    std::fill_n(seen, words, 0);
  }
  seen[first / 64] |= std::uint64_t{1} << (first % 64);

  std::size_t offered = 1;
  const auto size = point_owner_.size();
  for (std::size_t step = 1; step < size && offered < n; ++step) {
    auto p = point + step;
    if (p >= size) p -= size;
    const auto owner = point_owner_[p];
    auto& word = seen[owner / 64];
    const auto bit = std::uint64_t{1} << (owner % 64);
    if (word & bit) continue;
    word |= bit;
    ++offered;
    if (accept(owner)) return owner;
  }
  return Pick::npos;
}

Pick ConsistentHash::pick(const PickContext& ctx) {
  if (!ctx.has_hash) return unkeyed_.pick(ctx);
  if (point_owner_.empty()) return {};
  const auto start = first_point(ctx.hash);

  if (balance_factor_ <= 0) {
    return Pick{walk(start, [&](std::uint32_t i) { return !skip(*endpoints_[i], i, ctx); })};
  }

  // Bounded loads: the cap comes from the load of the servers that may take requests now.
  const auto [total, available] = totals(ctx.worker);
  if (available <= 0) return {};
  const auto cap = static_cast<std::int64_t>(std::ceil(
      balance_factor_ * static_cast<double>(std::max<std::int64_t>(0, total) + 1) /
      static_cast<double>(available)));
  std::uint32_t over_cap = Pick::npos;  // the key's first candidate that is only over the cap
  const auto chosen = walk(start, [&](std::uint32_t i) {
    if (skip(*endpoints_[i], i, ctx)) return false;
    if (endpoints_[i]->in_flight() + 1 <= cap) return true;
    if (over_cap == Pick::npos) over_cap = i;
    return false;
  });
  return Pick{chosen != Pick::npos ? chosen : over_cap};
}

ConsistentHash::Totals ConsistentHash::sum(std::size_t first, std::size_t last) const noexcept {
  Totals t;
  for (auto i = first; i < last; ++i) {
    const auto& e = *endpoints_[i];
    if (!e.available()) continue;
    ++t.available;
    t.in_flight += std::max<std::int64_t>(0, e.in_flight());
  }
  return t;
}

ConsistentHash::Totals ConsistentHash::totals(unsigned worker) noexcept {
  const auto n = endpoints_.size();
  if (windows_ == 0) return sum(0, n);
  // Re-sum one window of this worker's and apply the difference to its running totals. Only
  // this worker writes them: loads and stores, no locked instruction.
  auto& mine = (*totals_)[worker];
  const auto w = static_cast<std::size_t>(mine.cursor.load(std::memory_order_relaxed) % windows_);
  mine.cursor.store(w + 1, std::memory_order_relaxed);
  const auto now = sum(w * totals_window, std::min(n, (w + 1) * totals_window));
  const auto apply = [](std::atomic<std::int64_t>& window, std::atomic<std::int64_t>& total,
                        std::int64_t value) {
    const auto before = window.load(std::memory_order_relaxed);
    if (before == value) return;
    window.store(value, std::memory_order_relaxed);
    total.store(total.load(std::memory_order_relaxed) + value - before, std::memory_order_relaxed);
  };
  apply(mine.window_in_flight[w], mine.in_flight, now.in_flight);
  apply(mine.window_available[w], mine.available, now.available);
  return {mine.in_flight.load(std::memory_order_relaxed),
          mine.available.load(std::memory_order_relaxed)};
}

std::vector<std::uint32_t> ConsistentHash::candidates(std::uint64_t hash) const {
  std::vector<std::uint32_t> out;
  if (point_owner_.empty()) return out;
  walk(first_point(hash), [&](std::uint32_t i) {
    out.push_back(i);
    return false;
  });
  return out;
}

template <>
std::unique_ptr<Balancer> make_policy<config::Balance::hash>(std::span<Endpoint* const> endpoints,
                                                             const BalancerOptions& options) {
  return std::make_unique<ConsistentHash>(endpoints, options.hash_balance_factor, options.workers);
}

}  // namespace sluice
