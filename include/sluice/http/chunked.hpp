#pragma once
// An incremental decoder and validator for the chunked transfer coding (RFC 9112 §7.1), used on
// request bodies before any of their bytes go upstream.
//
// Feed it the bytes as they arrive; it copies chunk data to the output and stops at the first byte
// that breaks the grammar, never waiting for more input to decide that what it has is wrong: a
// bare LF or a stray byte after the chunk data is an error at that byte. It also tells the caller
// whether it stands at a chunk boundary (the data so far is followed by its CRLF), so that a relay
// can forward only chunks that were validated whole.
//
// One decoder per message, owned by one session; no allocation.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "sluice/http/strict.hpp"

namespace sluice::http {

class ChunkedDecoder {
public:
  struct Limits {
    // A chunk-size line with its extensions (RFC 9112 §7.1.1: a recipient SHOULD limit them).
    std::size_t max_line = 4096;
    // The whole trailer section, field lines and their CRLFs.
    std::size_t max_trailer = 8192;
  };

  enum class Status : std::uint8_t { need_more, done, invalid };

  struct Step {
    std::size_t consumed = 0;  // input bytes used
    std::size_t produced = 0;  // data bytes written to the output
    Status status = Status::need_more;
    Violation violation = Violation::none;
  };

  ChunkedDecoder() noexcept = default;
  explicit ChunkedDecoder(Limits limits) noexcept : limits_(limits) {}

  // Decodes as much of `in` as the grammar and `out` allow. Stops when `in` is used up, `out` is
  // full, the last chunk's trailer section ended (done: bytes after it belong to the next
  // message and are not consumed) or a byte is invalid (then it stays invalid).
  Step feed(std::string_view in, std::span<char> out) noexcept;

  // Between chunks: every data byte produced so far was followed by its CRLF (or the body is
  // done). A relay holding data for a chunk that is not yet at its boundary must not send it.
  bool at_boundary() const noexcept;
  bool done() const noexcept { return state_ == State::done; }

private:
  enum class State : std::uint8_t {
    size,            // chunk-size digits
    size_ws,         // BWS after the size or after an extension value
    ext_name_start,  // after ";" (BWS allowed)
    ext_name,        // chunk-ext-name
    ext_name_ws,     // BWS after the name
    ext_value_start, // after "=" (BWS allowed)
    ext_token,       // chunk-ext-val as token
    ext_quoted,      // chunk-ext-val as quoted-string
    ext_quoted_pair, // after a backslash inside it
    ext_value_end,   // after the closing quote
    size_lf,         // CR seen at the end of the size line
    data,
    data_cr,         // data done, CR expected
    data_lf,
    trailer_start,   // start of a trailer field line, or the final CRLF
    trailer_name,
    trailer_value,
    trailer_lf,
    final_lf,
    done,
    invalid,
  };

  bool step(unsigned char c) noexcept;
  bool size_line_byte(unsigned char c) noexcept;
  bool extension_byte(unsigned char c) noexcept;
  bool trailer_byte(unsigned char c) noexcept;
  bool to(State s) noexcept {
    state_ = s;
    return true;
  }
  bool fail(Violation v) noexcept;

  Limits limits_;
  State state_ = State::size;
  std::uint64_t remaining_ = 0;   // chunk data left in the current chunk
  std::size_t line_ = 0;          // bytes of the current size line
  std::size_t trailer_ = 0;       // bytes of the trailer section so far
  bool digits_ = false;           // the size line has at least one digit
  Violation violation_ = Violation::none;
  // The start of the current trailer field name, to spot framing fields.
  char name_[20] = {};
  std::size_t name_len_ = 0;
};

}  // namespace sluice::http
