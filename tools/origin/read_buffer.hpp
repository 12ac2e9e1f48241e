#pragma once
// A contiguous receive buffer: Beast's parser needs a whole header in one piece, and a single
// region means a single read_some per wake-up. Starts small (most connections only ever hold a
// few hundred bytes of request) and grows only for large headers, pipelined bursts and uploads.
// Touched only from its connection's thread.

#include <boost/asio/buffer.hpp>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>

namespace sluice::origin {

class read_buffer {
 public:
  static constexpr std::size_t initial_capacity = 8 * 1024;
  // Room for a maximal header (64 KiB) plus pipelined requests or body bytes behind it; a
  // power-of-two multiple of initial_capacity so that doubling lands on it exactly.
  static constexpr std::size_t max_capacity = 256 * 1024;

  std::string_view data() const { return {storage_.get() + begin_, end_ - begin_}; }
  bool empty() const { return begin_ == end_; }
  void consume(std::size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  void clear() { begin_ = end_ = 0; }

  // Free space of at least `want` bytes (at least 1 when want is 0) if the capacity allows,
  // moving unread bytes to the front or growing as needed; empty when the buffer is full.
  boost::asio::mutable_buffer prepare(std::size_t want);
  void commit(std::size_t n) { end_ += n; }

 private:
  std::unique_ptr<char[]> storage_;
  std::size_t capacity_ = 0;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

inline boost::asio::mutable_buffer read_buffer::prepare(std::size_t want) {
  if (want == 0) want = 1;
  const std::size_t used = end_ - begin_;
  if (capacity_ - end_ < want) {
    std::size_t needed = used + want;
    if (needed > max_capacity) needed = max_capacity;
    if (needed <= capacity_) {
      std::memmove(storage_.get(), storage_.get() + begin_, used);
    } else {
      std::size_t cap = capacity_ == 0 ? initial_capacity : capacity_;
      while (cap < needed) cap *= 2;
      auto grown = std::make_unique_for_overwrite<char[]>(cap);
      if (used != 0) std::memcpy(grown.get(), storage_.get() + begin_, used);
      storage_ = std::move(grown);
      capacity_ = cap;
    }
    begin_ = 0;
    end_ = used;
  }
  return {storage_.get() + end_, capacity_ - end_};
}

}  // namespace sluice::origin
