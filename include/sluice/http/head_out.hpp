#pragma once
// HeadOut: the splices' writer of an outgoing head (head_index.cpp). It appends to a std::string
// through a cursor: room is made a step at a time (one resize of the string, within the capacity
// a pooled head string keeps), each piece is then a plain copy, and close() cuts the string to
// what was written. A std::string::append per piece checks the capacity, copies through a call
// to memcpy and writes the length and the terminator each time: the four pieces of one added
// line ("X-Request-Id", ": ", the id, CRLF) cost ~120 instructions that way, ~30 this way
// (bench/callgrind.sh). Internal to src/http.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace sluice::http::detail {

// n bytes (sizeof(Word) <= n <= 2 * sizeof(Word)) as two words that overlap in the middle.
template <class Word>
[[gnu::always_inline]] inline void copy_overlapping(char* to, const char* from, std::size_t n) noexcept {
  Word a, b;
  std::memcpy(&a, from, sizeof a);
  std::memcpy(&b, from + n - sizeof b, sizeof b);
  std::memcpy(to, &a, sizeof a);
  std::memcpy(to + n - sizeof b, &b, sizeof b);
}

// memcpy for the small pieces of a head: a piece of known size (a literal) compiles to a few
// moves, and one of 1-16 bytes takes two overlapping loads and stores instead of a call.
[[gnu::always_inline]] inline void copy_piece(char* to, const char* from, std::size_t n) noexcept {
  if (n > 16) {
    std::memcpy(to, from, n);
  } else if (n >= 8) {
    copy_overlapping<std::uint64_t>(to, from, n);
  } else if (n >= 4) {
    copy_overlapping<std::uint32_t>(to, from, n);
  } else if (n > 0) {
    to[0] = from[0];
    to[n / 2] = from[n / 2];
    to[n - 1] = from[n - 1];
  }
}

class HeadOut {
public:
  // `expected`: the bytes this head will most likely take (more is fine: the string grows).
  HeadOut(std::string& s, std::size_t expected) : s_(s) { open(expected); }
  HeadOut(const HeadOut&) = delete;
  HeadOut& operator=(const HeadOut&) = delete;
  ~HeadOut() { close(); }

  [[gnu::always_inline]] void append(std::string_view piece) {
    copy_piece(room(piece.size()), piece.data(), piece.size());
    commit(piece.size());
  }
  // Room for n bytes at the cursor, written by the caller, then commit(n): one check for the
  // pieces of a line instead of one per piece.
  [[gnu::always_inline]] char* room(std::size_t n) {
    if (n > static_cast<std::size_t>(end_ - p_)) grow(n);
    return p_;
  }
  void commit(std::size_t n) noexcept { p_ += n; }
  void push_back(char c) {
    if (p_ == end_) grow(1);
    *p_++ = c;
  }
  // The whole of the string so far: what was there before, then what was written.
  std::size_t size() const noexcept { return static_cast<std::size_t>(p_ - s_.data()); }
  // Back to an earlier size(): what was written after it is forgotten.
  void cut(std::size_t n) noexcept { p_ = s_.data() + n; }

  // f(std::string&) appends to the string itself (code written for std::string: the edge rules,
  // a rewritten path); writing through the cursor goes on after it.
  template <class F>
  void with_string(F&& f) {
    close();
    f(s_);
    open(0);
  }

  // The string is cut to what was written (the destructor does it too).
  void close() { s_.resize(size()); }

private:
  static constexpr std::size_t step = 256;

  void open(std::size_t expected) {
    const auto at = s_.size();
    s_.resize(at + std::max(expected, step));
    p_ = s_.data() + at;
    end_ = s_.data() + s_.size();
  }
  void grow(std::size_t need) {
    const auto at = size();
    s_.resize(s_.size() + std::max({need, step, s_.size()}));
    p_ = s_.data() + at;
    end_ = s_.data() + s_.size();
  }

  std::string& s_;
  char* p_ = nullptr;
  char* end_ = nullptr;
};

}  // namespace sluice::http::detail
