#pragma once
// Strings whose capacity outlives their user (a new connection allocates
// nothing the previous one could leave behind). A session writes both heads of each exchange into
// one std::string; a fresh session's string grew by malloc twice, once for the request head and
// once for the longer response head, on every new connection and every wake of a parked one. A
// session now takes its string here and gives it back when it ends.
//
// Keeps at most `cap` strings, each of at most `max_capacity` bytes (one that grew for an unusual
// head goes back to the heap), so a burst of connections leaves at most cap x max_capacity
// behind, and shed() frees those no take() needed since its last call (as BlockPool::shed()).
// One thread, like everything a worker owns.
#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace sluice {

class StringPool {
public:
  StringPool(std::size_t cap, std::size_t max_capacity) : cap_(cap), max_capacity_(max_capacity) {
    free_.reserve(cap);
  }
  StringPool(const StringPool&) = delete;
  StringPool& operator=(const StringPool&) = delete;

  // An empty string, with the capacity of one given back earlier when there is one.
  std::string take() noexcept {
    if (free_.empty()) return {};
    std::string s = std::move(free_.back());
    free_.pop_back();
    if (free_.size() < fewest_free_) fewest_free_ = free_.size();
    return s;
  }
  // `s` is done with: its capacity is kept for the next take() if the pool has room and it is
  // worth keeping (beyond the string's own inline buffer, within max_capacity).
  void keep(std::string&& s) noexcept {
    const bool inline_only = s.capacity() <= std::string().capacity();
    if (free_.size() == cap_ || s.capacity() > max_capacity_ || inline_only) return;
    s.clear();
    free_.push_back(std::move(s));  // within the reserved capacity: no allocation
  }
  std::size_t size() const noexcept { return free_.size(); }

  // Frees the strings no take() needed since the last call; returns the bytes freed.
  std::size_t shed() noexcept {
    std::size_t bytes = 0;
    for (auto unused = std::min(fewest_free_, free_.size()); unused > 0; --unused) {
      bytes += free_.back().capacity();
      free_.pop_back();
    }
    fewest_free_ = free_.size();
    return bytes;
  }

private:
  std::size_t cap_;
  std::size_t max_capacity_;
  std::vector<std::string> free_;
  std::size_t fewest_free_ = 0;  // the free list's low-water mark since the last shed()
};

}  // namespace sluice
