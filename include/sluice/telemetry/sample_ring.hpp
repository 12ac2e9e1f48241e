#pragma once
// A fixed-capacity ring of the most recent samples (the dashboard's per-second history): push()
// overwrites the oldest once full, and nothing allocates after construction. Not thread-safe: the
// control thread owns every ring (the sampler writes, the admin listener reads, one thread).
#include <cstddef>
#include <stdexcept>
#include <vector>

namespace sluice::telemetry {

template <class T>
class SampleRing {
public:
  explicit SampleRing(std::size_t capacity) : slots_(capacity) {
    if (capacity == 0) throw std::invalid_argument("SampleRing capacity must be > 0");
  }

  void push(const T& sample) {
    slots_[(first_ + size_) % slots_.size()] = sample;
    if (size_ < slots_.size())
      ++size_;
    else
      first_ = (first_ + 1) % slots_.size();
  }

  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return slots_.size(); }
  bool empty() const noexcept { return size_ == 0; }

  // Oldest first: [0] is the oldest kept, [size() - 1] the newest. Precondition: i < size().
  const T& operator[](std::size_t i) const { return slots_[(first_ + i) % slots_.size()]; }
  // age 0 = the newest, 1 = the one before, ... Precondition: age < size().
  const T& newest(std::size_t age = 0) const { return (*this)[size_ - 1 - age]; }

  void clear() noexcept {
    first_ = 0;
    size_ = 0;
  }

private:
  std::vector<T> slots_;
  std::size_t first_ = 0;  // index of the oldest sample
  std::size_t size_ = 0;
};

}  // namespace sluice::telemetry
