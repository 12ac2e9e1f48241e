#pragma once
// The strict head scanner (RFC 9112) shared by scan_*_head() (strict.cpp) and the head index
// (head_index.cpp): every byte rule of a request or status line and of the field lines lives here,
// once. The scanner reports what it recognised to a Sink, called only for a line that passed its
// rules: request_line(method, target, version), status_line(version, status, reason) and
// field(name_at, name_size, value_at, value_end) (offsets into the bytes; the value still has its
// OWS). With NoSink those calls compile away. Internal to src/http.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "sluice/http/chars.hpp"
#include "sluice/http/strict.hpp"

namespace sluice::http::detail {

struct NoSink {
  void request_line(std::string_view, std::string_view, unsigned) noexcept {}
  void status_line(unsigned, unsigned, std::string_view) noexcept {}
  void field(std::size_t, std::size_t, std::size_t, std::size_t) noexcept {}
};

using namespace chars;

// One pass over the bytes received so far. Every step either advances pos_ and returns true, or
// records the outcome in out_ and returns false. Running out of bytes is "need more" unless the
// head can no longer end within max_head.
template <class Sink = NoSink>
class HeadScanner {
public:
  HeadScanner(std::string_view bytes, std::size_t max_head, Sink sink = {}) noexcept
      : bytes_(bytes), max_head_(max_head), limit_(std::min(bytes.size(), max_head)), sink_(sink) {}

  HeadScan request(std::size_t max_target) noexcept {
    if (skip_empty_lines() && request_line(max_target) && field_lines()) complete();
    return out_;
  }

  HeadScan response() noexcept {
    if (status_line() && field_lines()) complete();
    return out_;
  }

private:
  bool more() const noexcept { return pos_ < limit_; }
  unsigned char cur() const noexcept { return static_cast<unsigned char>(bytes_[pos_]); }

  bool fail(Violation v) noexcept {
    out_.result = HeadScan::Result::invalid;
    out_.violation = v;
    return false;
  }

  bool starve() noexcept {
    // Scanning stops at max_head bytes: once that many arrived without the end of the head, the
    // head is larger than allowed, no need to wait for the rest (431 early).
    if (bytes_.size() >= max_head_) return fail(Violation::head_too_large);
    out_.result = HeadScan::Result::need_more;
    return false;
  }

  void complete() noexcept {
    out_.result = HeadScan::Result::complete;
    out_.head_size = pos_;
  }

  // At a CR or LF. RFC 9112 §2.2: lines end with CRLF; a bare CR MUST be rejected (or replaced),
  // and we reject a bare LF as well, since parsers that disagree on line ends enable smuggling.
  bool line_break() noexcept {
    if (cur() == '\n') return fail(Violation::bare_lf);
    if (pos_ + 1 >= limit_) return starve();
    if (bytes_[pos_ + 1] != '\n') return fail(Violation::bare_cr);
    pos_ += 2;
    return true;
  }

  // A wrong byte inside a line: a line break that is itself malformed is reported as such,
  // a well-formed one means the line ended early (`early`), anything else is `wrong`.
  bool fail_in_line(Violation wrong, Violation early) noexcept {
    if (!is_line_break(cur())) return fail(wrong);
    return line_break() && fail(early);
  }

  bool skip_empty_lines() noexcept {
    // RFC 9112 §2.2: a server SHOULD ignore at least one empty line received before the
    // request-line. They still count toward max_head, which bounds how many we skip.
    while (more() && is_line_break(cur())) {
      if (!line_break()) return false;
    }
    out_.head_start = pos_;
    return true;
  }

  // RFC 9112 §2.3: HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive; we speak 1.0 and 1.1
  // only, so "PRI * HTTP/2.0" (the HTTP/2 preface) ends here. `not_http` is for a wrong name.
  bool version(Violation not_http) noexcept {
    static constexpr std::string_view prefix = "HTTP/1.";
    // The common case at once: all eight bytes there, and "HTTP/1.1" or "HTTP/1.0".
    if (limit_ - pos_ >= 8 && bytes_.substr(pos_, 7) == prefix && (bytes_[pos_ + 7] == '1' || bytes_[pos_ + 7] == '0')) {
      version_ = bytes_[pos_ + 7] == '1' ? 11 : 10;
      pos_ += 8;
      return true;
    }
    for (std::size_t i = 0; i < prefix.size(); ++i, ++pos_) {
      if (!more()) return starve();
      if (cur() != static_cast<unsigned char>(prefix[i])) {
        return fail(i < 5 ? not_http : Violation::bad_version);
      }
    }
    if (!more()) return starve();
    if (cur() != '0' && cur() != '1') return fail(Violation::bad_version);
    version_ = cur() == '1' ? 11 : 10;
    ++pos_;
    return true;
  }

  // RFC 9112 §3: request-line = method SP request-target SP HTTP-version, single spaces.
  bool request_line(std::size_t max_target) noexcept {
    const auto method_start = pos_;
    while (more() && is(cur(), k_tchar)) ++pos_;  // RFC 9110 §9.1: method = token
    if (!more()) return starve();
    if (cur() != ' ') return fail_in_line(Violation::bad_method, Violation::bad_request_line);
    if (pos_ == method_start) return fail(Violation::bad_request_line);
    ++pos_;

    const auto method = bytes_.substr(method_start, pos_ - 1 - method_start);
    const auto target_start = pos_;
    while (more() && is(cur(), k_vchar)) {
      // RFC 9110 §7.1, RFC 3986 §3.5: a fragment is never sent in a request-target; origins
      // differ on whether "#" ends the path, so it is refused at its byte (as HAProxy does).
      if (cur() == '#') return fail(Violation::fragment);
      ++pos_;
      // Checked per byte so that a long target gets its 414 before the rest of the head arrives.
      if (pos_ - target_start > max_target) return fail(Violation::uri_too_long);
    }
    if (!more()) return starve();
    if (cur() != ' ') return fail_in_line(Violation::bad_target, Violation::bad_request_line);
    if (pos_ == target_start) return fail(Violation::bad_request_line);
    const auto target = bytes_.substr(target_start, pos_ - target_start);
    ++pos_;

    if (!version(Violation::bad_version)) return false;
    if (!more()) return starve();
    if (!is_line_break(cur())) {
      return fail(cur() == ' ' ? Violation::bad_request_line : Violation::bad_version);
    }
    // RFC 9112 §3.2.4: asterisk-form is only used for a server-wide OPTIONS.
    if (target.size() == 1 && target[0] == '*' && method != "OPTIONS") return fail(Violation::asterisk_form);
    sink_.request_line(method, target, version_);
    return line_break();
  }

  // RFC 9112 §4: status-line = HTTP-version SP status-code SP [ reason-phrase ].
  bool status_line() noexcept {
    if (!version(Violation::bad_status_line)) return false;
    if (!more()) return starve();
    if (cur() != ' ') return fail_in_line(Violation::bad_version, Violation::bad_status_line);
    ++pos_;
    // RFC 9110 §15: three digits, and values outside 100..599 are invalid.
    unsigned status = 0;
    for (int i = 0; i < 3; ++i, ++pos_) {
      if (!more()) return starve();
      const auto lowest = i == 0 ? '1' : '0';
      const auto highest = i == 0 ? '5' : '9';
      if (cur() < lowest || cur() > highest) {
        return fail_in_line(Violation::bad_status_line, Violation::bad_status_line);
      }
      status = status * 10 + static_cast<unsigned>(cur() - '0');
    }
    if (!more()) return starve();
    // The SP is required even when the reason is empty: "HTTP/1.1 200\r\n" is rejected.
    if (cur() != ' ') return fail_in_line(Violation::bad_status_line, Violation::bad_status_line);
    ++pos_;
    // reason-phrase = *( HTAB / SP / VCHAR / obs-text )
    const auto reason_start = pos_;
    pos_ += field_run(bytes_.data() + pos_, limit_ - pos_);
    if (!more()) return starve();
    if (is_line_break(cur())) {
      sink_.status_line(version_, status, bytes_.substr(reason_start, pos_ - reason_start));
      return line_break();
    }
    return fail(is(cur(), k_control) ? Violation::control_byte : Violation::bad_status_line);
  }

  // RFC 9112 §2.1: *( field-line CRLF ) CRLF. Returns true once the final empty line is consumed.
  bool field_lines() noexcept {
    for (;;) {
      if (!more()) return starve();
      if (is_line_break(cur())) return line_break();
      // RFC 9112 §5.2 obs-fold and §2.2 whitespace before the first field line: both rejected.
      if (is_ows(cur())) return fail(Violation::obs_fold);
      if (!field_line()) return false;
    }
  }

  // RFC 9112 §5: field-line = field-name ":" OWS field-value OWS.
  bool field_line() noexcept {
    const auto name_start = pos_;
    pos_ += token_run(bytes_.data() + pos_, limit_ - pos_);
    if (!more()) return starve();
    if (is_ows(cur())) return whitespace_after_name();
    if (cur() != ':') return fail_in_line(Violation::bad_field_name, Violation::bad_field_name);
    if (pos_ == name_start) return fail(Violation::bad_field_name);
    const auto name_size = pos_ - name_start;
    ++pos_;
    const auto value_start = pos_;
    pos_ += field_run(bytes_.data() + pos_, limit_ - pos_);
    if (!more()) return starve();
    if (is_line_break(cur())) {
      sink_.field(name_start, name_size, value_start, pos_);
      return line_break();
    }
    return fail(is(cur(), k_control) ? Violation::control_byte : Violation::bad_field_value);
  }

  bool whitespace_after_name() noexcept {
    while (more() && is_ows(cur())) ++pos_;
    if (!more()) return starve();
    // RFC 9112 §5.1: whitespace between name and colon MUST be rejected with 400 (a proxy MUST
    // remove it before forwarding; we refuse instead).
    if (cur() == ':') return fail(Violation::space_before_colon);
    return fail_in_line(Violation::bad_field_name, Violation::bad_field_name);
  }

  std::string_view bytes_;
  std::size_t max_head_;
  std::size_t limit_;
  std::size_t pos_ = 0;
  unsigned version_ = 0;
  HeadScan out_;
  Sink sink_;
};

}  // namespace sluice::http::detail

// The framing and Host rules (strict.cpp) over the facts they read, so that the head index
// (head_index.cpp) and the test oracle over Beast's fields (fuzz/oracle/) apply the same code.
namespace sluice::http::detail {

struct FramingFacts {
  std::size_t te_lines = 0;
  std::size_t cl_lines = 0;
  std::string_view te;  // the first line's value, OWS trimmed
  std::string_view cl;
};

Violation check_framing(const FramingFacts& facts, unsigned version, bool is_request) noexcept;
// A request's rules: framing, then `framing_variant` (a Transfer_Encoding-like name), then
// the Host lines (their count and the first one's value).
Violation check_request_facts(const FramingFacts& framing, bool framing_variant, std::size_t hosts,
                              std::string_view host, unsigned version) noexcept;
// 1*DIGIT up to 2^63-1.
std::optional<std::uint64_t> parse_content_length(std::string_view value) noexcept;
bool is_framing_variant(std::string_view name) noexcept;
bool valid_host(std::string_view value) noexcept;

}  // namespace sluice::http::detail
