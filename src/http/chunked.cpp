// The chunked transfer coding, RFC 9112 §7.1:
//
//   chunked-body   = *chunk last-chunk trailer-section CRLF
//   chunk          = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//   chunk-size     = 1*HEXDIG
//   last-chunk     = 1*("0") [ chunk-ext ] CRLF
//   chunk-ext      = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//   chunk-ext-val  = token / quoted-string
//   trailer-section = *( field-line CRLF )
//
// Decisions where the RFC leaves a choice (the same as for heads, strict.cpp):
//  - A bare LF is an error wherever it appears (RFC 9112 §2.2 would let a recipient accept it as
//    a line end; parsers that disagree on line ends are how bodies get smuggled), and so is a CR
//    not followed by LF.
//  - The size line with its extensions is bounded (RFC 9112 §7.1.1: a server ought to limit the
//    total length of chunk extensions), and so is the trailer section (RFC 9112 §7.1.2). An
//    unbalanced quote in an extension value runs into the CRLF and is an error there.
//  - Extensions are checked and dropped: we re-chunk the body, so the origin sees none.
//  - Trailer fields must be well-formed field lines (no obs-fold, no space before the colon) and
//    may not carry framing or routing (RFC 9110 §6.5.1: Content-Length, Transfer-Encoding, Host,
//    Trailer, and their underscore spellings).
#include "sluice/http/chunked.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "sluice/http/chars.hpp"

namespace sluice::http {

namespace {

using namespace chars;

constexpr std::uint64_t hex_value(unsigned char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// RFC 9110 §5.6.4: qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text.
constexpr bool is_qdtext(unsigned char c) noexcept {
  return c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5B) ||
         (c >= 0x5D && c <= 0x7E) || c >= 0x80;
}

}  // namespace

bool ChunkedDecoder::fail(Violation v) noexcept {
  state_ = State::invalid;
  violation_ = v;
  return false;
}

bool ChunkedDecoder::at_boundary() const noexcept {
  return state_ != State::data && state_ != State::data_cr && state_ != State::data_lf;
}

ChunkedDecoder::Step ChunkedDecoder::feed(std::string_view in, std::span<char> out) noexcept {
  std::size_t i = 0;
  std::size_t o = 0;
  while (i < in.size() && state_ != State::done && state_ != State::invalid) {
    if (state_ == State::data) {
      if (o == out.size()) break;
      const auto n = static_cast<std::size_t>(
          std::min<std::uint64_t>(remaining_, std::min(in.size() - i, out.size() - o)));
      std::memcpy(out.data() + o, in.data() + i, n);
      i += n;
      o += n;
      remaining_ -= n;
      if (remaining_ == 0) state_ = State::data_cr;
      continue;
    }
    if (!step(static_cast<unsigned char>(in[i++]))) break;
  }
  const auto status = state_ == State::done      ? Status::done
                      : state_ == State::invalid ? Status::invalid
                                                 : Status::need_more;
  return {i, o, status, violation_};
}

bool ChunkedDecoder::step(unsigned char c) noexcept {
  // A bare LF is wrong in every position outside chunk data, and reported at its byte.
  const bool lf_expected =
      state_ == State::size_lf || state_ == State::data_lf || state_ == State::trailer_lf ||
      state_ == State::final_lf;
  if (c == '\n' && !lf_expected) return fail(Violation::bare_lf);
  switch (state_) {
    case State::size_lf:
    case State::data_lf:
    case State::trailer_lf:
    case State::final_lf:
      if (c != '\n') return fail(Violation::bare_cr);
      if (state_ == State::data_lf) return to(State::size);
      if (state_ == State::trailer_lf) return to(State::trailer_start);
      if (state_ == State::final_lf) return to(State::done);
      line_ = 0;
      digits_ = false;
      return to(remaining_ == 0 ? State::trailer_start : State::data);
    case State::data_cr:
      return c == '\r' ? to(State::data_lf) : fail(Violation::bad_chunk);
    case State::trailer_start:
    case State::trailer_name:
    case State::trailer_value:
      return trailer_byte(c);
    default:
      return size_line_byte(c);
  }
}

// The chunk-size line up to its CR: digits, then extensions.
bool ChunkedDecoder::size_line_byte(unsigned char c) noexcept {
  if (++line_ > limits_.max_line) return fail(Violation::chunk_line_too_long);
  if (state_ != State::size) return extension_byte(c);
  if (is(c, k_hex)) {
    // RFC 9112 §7.1: recipients MUST anticipate large sizes and guard against overflow.
    if (remaining_ > (std::numeric_limits<std::uint64_t>::max() >> 4)) {
      return fail(Violation::bad_chunk);
    }
    remaining_ = remaining_ * 16 + hex_value(c);
    digits_ = true;
    return true;
  }
  if (!digits_) return fail(Violation::bad_chunk);  // 1*HEXDIG
  if (c == '\r') return to(State::size_lf);
  if (c == ';') return to(State::ext_name_start);
  if (is_ows(c)) return to(State::size_ws);
  return fail(Violation::bad_chunk);
}

// chunk-ext, one byte at a time. A CR ends the line only where the grammar allows it: not inside
// a quoted string (an unbalanced quote), not right after ";" or "=".
bool ChunkedDecoder::extension_byte(unsigned char c) noexcept {
  const bool ows = is_ows(c);
  const bool tchar = is(c, k_tchar);
  switch (state_) {
    case State::size_ws:  // BWS is only allowed before a ";": "5 \r\n" is refused
      if (ows) return true;
      return c == ';' ? to(State::ext_name_start) : fail(Violation::bad_chunk);
    case State::ext_name_start:
      if (ows) return true;
      return tchar ? to(State::ext_name) : fail(Violation::bad_chunk);
    case State::ext_name:
    case State::ext_name_ws:
      if (tchar && state_ == State::ext_name) return true;
      if (ows) return to(State::ext_name_ws);
      if (c == '=') return to(State::ext_value_start);
      if (c == ';') return to(State::ext_name_start);
      return c == '\r' && state_ == State::ext_name ? to(State::size_lf)
                                                     : fail(Violation::bad_chunk);
    case State::ext_value_start:
      if (ows) return true;
      if (c == '"') return to(State::ext_quoted);
      return tchar ? to(State::ext_token) : fail(Violation::bad_chunk);
    case State::ext_token:
      if (tchar) return true;
      if (ows) return to(State::size_ws);
      if (c == ';') return to(State::ext_name_start);
      return c == '\r' ? to(State::size_lf) : fail(Violation::bad_chunk);
    case State::ext_value_end:  // after a quoted-string
      if (ows) return to(State::size_ws);
      if (c == ';') return to(State::ext_name_start);
      return c == '\r' ? to(State::size_lf) : fail(Violation::bad_chunk);
    case State::ext_quoted:
      if (c == '"') return to(State::ext_value_end);
      if (c == '\\') return to(State::ext_quoted_pair);
      return is_qdtext(c) ? true : fail(Violation::bad_chunk);
    case State::ext_quoted_pair:
      // RFC 9110 §5.6.4: quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
      return is(c, k_field) ? to(State::ext_quoted) : fail(Violation::bad_chunk);
    default:
      return fail(Violation::bad_chunk);
  }
}

// trailer-section = *( field-line CRLF ), then the final CRLF; field-line as in a head (RFC 9112
// §5), without obs-fold.
bool ChunkedDecoder::trailer_byte(unsigned char c) noexcept {
  if (++trailer_ > limits_.max_trailer) return fail(Violation::trailer_too_large);
  if (state_ == State::trailer_start) {
    if (c == '\r') return to(State::final_lf);
    if (!is(c, k_tchar)) return fail(Violation::bad_trailer);  // obs-fold, empty name, CTL
    name_len_ = 0;
    state_ = State::trailer_name;
  }
  if (state_ == State::trailer_name) {
    if (is(c, k_tchar)) {
      if (name_len_ < sizeof name_) name_[name_len_] = static_cast<char>(c);
      ++name_len_;
      return true;
    }
    if (c != ':') return fail(Violation::bad_trailer);  // space before colon, a CR, a CTL
    // Names longer than the buffer are longer than any forbidden one.
    if (name_len_ <= sizeof name_ && is_forbidden_trailer({name_, name_len_})) {
      return fail(Violation::bad_trailer);
    }
    return to(State::trailer_value);
  }
  if (c == '\r') return to(State::trailer_lf);
  return is(c, k_field) ? true : fail(Violation::bad_trailer);
}

}  // namespace sluice::http
