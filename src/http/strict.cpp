// Strict HTTP/1.1 head rules: a raw byte scan before Beast's parser and a framing check after it.
//
// What Beast 1.81's parser already does, measured by driving http::request_parser /
// response_parser with put() (pinned in tests/http/beast_parser_test.cpp, so a Boost upgrade that
// changes any of it fails a test).
//
// Beast rejects:
//  - CL then TE -> bad_transfer_encoding; TE chunked then CL -> bad_content_length;
//    CL 5 and CL 6 (two lines or "5, 6") -> multiple_content_length;
//    CL "+5", "0x5", "" or > 2^64-1 -> bad_content_length;
//    TE chunked on two lines -> bad_transfer_encoding
//  - chunk size "0x10", "5 ", "5\n" -> bad_chunk_extension; more than 16 hex digits, "-1", " 5",
//    empty, chunk data not followed by CRLF -> bad_chunk
//  - " Host:" (leading whitespace), "Host :", ": a", a line without colon, obs-text in a name
//    -> bad_field; NUL, other CTLs, DEL or a bare LF in a value -> bad_value;
//    a bare CR -> bad_line_ending
//  - in the request line: DEL, HTAB, NUL in the target, "GET  /", "GET /" (HTTP/0.9) -> bad_target;
//    "HTTP/1.2", "http/1.1", "PRI * HTTP/2.0", a trailing SP, a bare LF after the version
//    -> bad_version; leading empty lines -> bad_method (Beast does not skip them)
//  - "HTTP/1.1 200" (no SP), a 2-digit status -> bad_status;
//    NUL or a bare LF in the reason -> bad_reason
//  - a Connection value that is not a token list -> bad_value
//
// Beast accepts (and we reject):
//  - TE gzip then CL: the body is framed by CL, the origin may frame by TE (smuggling)
//  - equal duplicates: CL 5 twice, CL "5, 5"; CL from 2^63 up to 2^64-1
//  - TE gzip, xchunked, "chunked, identity": the request then has no body at all (smuggling);
//    TE gzip + TE chunked on two lines (framed as chunked); TE chunked in HTTP/1.0
//  - obs-fold (joined into the value with a SP); obs-text in the request-target
//  - status codes 000 and 999; Host missing in HTTP/1.1 or repeated
//  - a head whose last line ends in a bare LF: need_more until the header limit, as Beast only
//    parses once it has seen CRLFCRLF
//
// And its fields container trims OWS around values on insert (so check_*_fields() never sees
// " 5" or "chunked\t") and keeps the lines of one name together, in arrival order.
//
// So the raw scan duplicates part of Beast on purpose: we must reject regardless of the parser
// behind us, and give every rejection one stable reason. Where Beast still rejects first (framing
// conflicts, chunk sizes), violation_from_parser_error() maps its error to our Violation.
//
// Decisions taken where the RFCs leave a choice:
//  - Bare CR and bare LF are errors everywhere (RFC 9112 §2.2 allows a recipient to accept a
//    bare LF; two parsers disagreeing on line ends is how requests get smuggled).
//  - obs-fold is rejected (RFC 9112 §5.2 allows a 400), and so is whitespace before the first
//    field line (RFC 9112 §2.2 allows rejecting it): both count as obs_fold.
//  - Leading empty lines before a request line are skipped (RFC 9112 §2.2 SHOULD), counted in
//    head_size and max_head, and reported as head_start. Not before a status line: the rule is
//    for servers.
//  - Request-target: VCHAR only. obs-text (>= 0x80) is rejected although Beast takes it: no URI
//    form (RFC 9112 §3.2) contains raw non-ASCII, and origins decode it differently.
//  - Control bytes: C0 controls (other than HTAB) in a field value or reason phrase are
//    control_byte; DEL there is bad_field_value / bad_status_line. In the method, the target or
//    a field name every wrong byte is that part's own violation (bad_method, bad_target,
//    bad_field_name); an empty part or a missing SP is bad_request_line.
//  - Status line: "HTTP/1.1 200" without the SP before the (empty) reason is rejected: RFC 9112
//    §4 requires the SP and Beast rejects it too (tolerating it would mean rewriting the bytes).
//    Status codes outside 100..599 are rejected (RFC 9110 §15).
//  - Content-Length: exactly one field line of 1*DIGIT, at most 2^63-1 (fits a signed 64-bit
//    length). Equal duplicates or a list "5, 5" are rejected although RFC 9110 §8.6 permits
//    accepting them: nothing legitimate sends them, and forwarding them feeds ambiguity.
//  - Transfer-Encoding: one field line only (RFC 9110 §5.3 would combine several lines, but
//    Beast frames by whichever line says chunked: a differential). Requests: exactly "chunked",
//    any case; RFC 9112 §6.1 allows codings before it, but no origin behind us has to understand
//    them, and fewer forms means fewer differentials. Responses: a token list whose final coding,
//    and only that one, is chunked ("gzip, chunked"); empty list elements are skipped (RFC 9110
//    §5.6.1), transfer-coding parameters are refused; a response TE without a final chunked
//    (read until close, RFC 9112 §6.3) is refused too. OWS around a value is not part of it
//    (RFC 9110 §5.5): Beast's parser and fields::insert() both trim it, so "chunked\t" on the
//    wire is "chunked" here and accepted. TE in an HTTP/1.0 message is refused (RFC 9112 §6.1:
//    its framing MUST be treated as faulty).
//  - Host (requests): missing in HTTP/1.1, repeated in any version, or not uri-host [":" port]
//    (RFC 9112 §3.2: all three MUST get a 400). An empty Host is valid.
#include "sluice/http/strict.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/rfc7230.hpp>

#include "sluice/http/chars.hpp"

namespace sluice::http {

namespace {

namespace bhttp = boost::beast::http;
using namespace chars;

// One pass over the bytes received so far. Every step either advances pos_ and returns true, or
// records the outcome in out_ and returns false. Running out of bytes is "need more" unless the
// head can no longer end within max_head.
class HeadScanner {
public:
  HeadScanner(std::string_view bytes, std::size_t max_head) noexcept
      : bytes_(bytes), max_head_(max_head), limit_(std::min(bytes.size(), max_head)) {}

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
    for (std::size_t i = 0; i < prefix.size(); ++i, ++pos_) {
      if (!more()) return starve();
      if (cur() != static_cast<unsigned char>(prefix[i])) {
        return fail(i < 5 ? not_http : Violation::bad_version);
      }
    }
    if (!more()) return starve();
    if (cur() != '0' && cur() != '1') return fail(Violation::bad_version);
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
    if (target == "*" && method != "OPTIONS") return fail(Violation::asterisk_form);
    return line_break();
  }

  // RFC 9112 §4: status-line = HTTP-version SP status-code SP [ reason-phrase ].
  bool status_line() noexcept {
    if (!version(Violation::bad_status_line)) return false;
    if (!more()) return starve();
    if (cur() != ' ') return fail_in_line(Violation::bad_version, Violation::bad_status_line);
    ++pos_;
    // RFC 9110 §15: three digits, and values outside 100..599 are invalid.
    for (int i = 0; i < 3; ++i, ++pos_) {
      if (!more()) return starve();
      const auto lowest = i == 0 ? '1' : '0';
      const auto highest = i == 0 ? '5' : '9';
      if (cur() < lowest || cur() > highest) {
        return fail_in_line(Violation::bad_status_line, Violation::bad_status_line);
      }
    }
    if (!more()) return starve();
    // The SP is required even when the reason is empty: "HTTP/1.1 200\r\n" is rejected.
    if (cur() != ' ') return fail_in_line(Violation::bad_status_line, Violation::bad_status_line);
    ++pos_;
    // reason-phrase = *( HTAB / SP / VCHAR / obs-text )
    while (more() && is(cur(), k_field)) ++pos_;
    if (!more()) return starve();
    if (is_line_break(cur())) return line_break();
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
    while (more() && is(cur(), k_tchar)) ++pos_;
    if (!more()) return starve();
    if (is_ows(cur())) return whitespace_after_name();
    if (cur() != ':') return fail_in_line(Violation::bad_field_name, Violation::bad_field_name);
    if (pos_ == name_start) return fail(Violation::bad_field_name);
    ++pos_;
    while (more() && is(cur(), k_field)) ++pos_;
    if (!more()) return starve();
    if (is_line_break(cur())) return line_break();
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
  HeadScan out_;
};

// RFC 9110 §8.6: Content-Length = 1*DIGIT. We cap it at 2^63-1 so that it fits a signed 64-bit
// length anywhere downstream (RFC 9110 §8.6: recipients MUST guard against overflow).
bool valid_content_length(std::string_view value) noexcept {
  if (value.empty()) return false;
  constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t n = 0;
  for (const char c : value) {
    if (!is(c, k_digit)) return false;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (n > (max - digit) / 10) return false;
    n = n * 10 + digit;
  }
  return true;
}

bool is_chunked(std::string_view coding) noexcept {
  return boost::beast::iequals(coding, "chunked");
}

// RFC 9112 §6.1: chunked MUST be the final coding and MUST NOT be applied more than once.
// transfer-coding parameters are not accepted: opt_token_list fails validation on them.
// `codings` counts the list's (non-empty) elements.
bool chunked_is_final(std::string_view value, std::size_t& codings) noexcept {
  const bhttp::opt_token_list list{value};
  if (!bhttp::validate_list(list)) return false;
  bool last_is_chunked = false;
  codings = 0;
  for (const auto coding : list) {
    if (last_is_chunked) return false;  // chunked followed by something else
    last_is_chunked = is_chunked(coding);
    ++codings;
  }
  return last_is_chunked;
}

// The rules that decide where the message ends (RFC 9112 §6.1, §6.3). A request may only be
// "chunked"; a response may carry codings before the final chunked.
Violation check_framing(const Fields& fields, unsigned version, bool is_request) noexcept {
  const auto te_lines = fields.count(bhttp::field::transfer_encoding);
  const auto cl_lines = fields.count(bhttp::field::content_length);
  // RFC 9112 §6.1: a message with both "ought to be handled as an error" (smuggling, §11.2).
  if (te_lines != 0 && cl_lines != 0) return Violation::content_length_with_transfer_encoding;
  if (te_lines != 0) {
    // Several TE lines are one list by RFC 9110 §5.3, but Beast and origins combine them
    // differently (Beast ignores all but the one that says chunked): refuse.
    if (te_lines > 1) return Violation::bad_transfer_encoding;
    // RFC 9112 §6.1: TE in HTTP/1.0 MUST be treated as faulty framing.
    if (version < 11) return Violation::bad_transfer_encoding;
    const auto value = fields.find(bhttp::field::transfer_encoding)->value();
    std::size_t codings = 0;
    if (!chunked_is_final(value, codings)) return Violation::bad_transfer_encoding;
    // A request's body is decoded here and re-chunked: a coding before chunked ("deflate,
    // chunked") is well-formed but one we do not handle (RFC 9112 §6.1 -> 501). Otherwise a
    // request says exactly "chunked": fewer accepted forms, fewer differentials.
    if (is_request && codings > 1) return Violation::unsupported_coding;
    if (is_request && !is_chunked(value)) return Violation::bad_transfer_encoding;
  }
  if (cl_lines != 0) {
    if (cl_lines > 1) return Violation::bad_content_length;
    if (!valid_content_length(fields.find(bhttp::field::content_length)->value())) {
      return Violation::bad_content_length;
    }
  }
  return Violation::none;
}

// A field name compared with a lower-case name, case-insensitively and with "_" read as "-".
bool folded_equals(std::string_view name, std::string_view lower) noexcept {
  if (name.size() != lower.size()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i] == '_' ? '-' : name[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

bool is_framing_name(std::string_view name) noexcept {
  return folded_equals(name, "content-length") || folded_equals(name, "transfer-encoding");
}

// "Transfer_Encoding", "content_length": not the framing fields by RFC 9110 §5.1, but a backend
// that folds "_" into "-" (CGI-style environments do) reads them as such, and then frames the
// body differently from us. nginx drops such fields; we refuse the request.
bool is_framing_variant(std::string_view name) noexcept {
  return name.find('_') != std::string_view::npos && is_framing_name(name);
}

// RFC 9110 §7.2: Host = uri-host [ ":" port ]; RFC 3986 §3.2.2: uri-host = IP-literal /
// IPv4address / reg-name, where reg-name = *( unreserved / pct-encoded / sub-delims ).
bool valid_host(std::string_view value) noexcept {
  std::size_t i = 0;
  if (!value.empty() && value[0] == '[') {
    // IP-literal: IPv6 or IPvFuture; both use unreserved, sub-delims and ':' (and '%' of an RFC
    // 6874 zone id), which is all we check.
    const auto close = value.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (i = 1; i < close; ++i) {
      if (!is(value[i], k_reg_name) && value[i] != ':' && value[i] != '%') return false;
    }
    i = close + 1;
  } else {
    for (; i < value.size() && value[i] != ':'; ++i) {
      if (value[i] == '%') {
        if (i + 2 >= value.size() || !is(value[i + 1], k_hex) || !is(value[i + 2], k_hex)) {
          return false;
        }
        i += 2;
      } else if (!is(value[i], k_reg_name)) {
        return false;
      }
    }
  }
  if (i == value.size()) return true;
  if (value[i] != ':') return false;
  for (++i; i < value.size(); ++i) {  // port = *DIGIT, may be empty
    if (!is(value[i], k_digit)) return false;
  }
  return true;
}

// Beast stops at the second of two conflicting framing fields and names that one; the head bytes
// tell what the message really carried. The head passed the raw scan, so lines end in CRLF.
Violation framing_violation(std::string_view head, Violation beast_says) noexcept {
  bool content_length = false;
  bool transfer_encoding = false;
  while (!head.empty()) {
    const auto eol = head.find("\r\n");
    const auto line = head.substr(0, eol);
    const auto name = line.substr(0, line.find(':'));
    content_length |= boost::beast::iequals(name, "content-length");
    transfer_encoding |= boost::beast::iequals(name, "transfer-encoding");
    if (eol == std::string_view::npos) break;
    head.remove_prefix(eol + 2);
  }
  if (content_length && transfer_encoding) return Violation::content_length_with_transfer_encoding;
  return beast_says;
}

}  // namespace

bool is_forbidden_trailer(std::string_view name) noexcept {
  return is_framing_name(name) || folded_equals(name, "host") || folded_equals(name, "trailer");
}

std::string_view describe(Violation v) {
  switch (v) {
    case Violation::none: return "none";
    case Violation::bare_cr: return "bare CR";
    case Violation::bare_lf: return "bare LF";
    case Violation::control_byte: return "control byte";
    case Violation::obs_fold: return "obs-fold";
    case Violation::space_before_colon: return "space before colon";
    case Violation::bad_field_name: return "bad field name";
    case Violation::bad_field_value: return "bad field value";
    case Violation::bad_method: return "bad method";
    case Violation::bad_target: return "bad target";
    case Violation::bad_request_line: return "bad request line";
    case Violation::bad_status_line: return "bad status line";
    case Violation::bad_version: return "bad version";
    case Violation::uri_too_long: return "uri too long";
    case Violation::head_too_large: return "header too large";
    case Violation::content_length_with_transfer_encoding:
      return "content-length with transfer-encoding";
    case Violation::bad_content_length: return "bad content-length";
    case Violation::bad_transfer_encoding: return "bad transfer-encoding";
    case Violation::missing_host: return "missing host";
    case Violation::repeated_host: return "repeated host";
    case Violation::bad_chunk: return "bad chunk";
    case Violation::bad_host: return "bad host";
    case Violation::framing_field_variant: return "framing field variant";
    case Violation::asterisk_form: return "asterisk-form not allowed";
    case Violation::fragment: return "fragment in target";
    case Violation::unsupported_coding: return "unsupported transfer-coding";
    case Violation::chunk_line_too_long: return "chunk line too long";
    case Violation::trailer_too_large: return "trailer too large";
    case Violation::bad_trailer: return "bad trailer";
  }
  return "unknown";
}

unsigned status_for(Violation v) {
  switch (v) {
    case Violation::uri_too_long: return 414;  // RFC 9112 §3: request-target longer than we parse
    case Violation::head_too_large: return 431;  // RFC 6585 §5
    // RFC 9112 §6.1: a server that receives a transfer coding it does not understand SHOULD
    // answer 501; we relay only chunked, so any coding before it is one we cannot pass on.
    case Violation::unsupported_coding: return 501;
    default: return 400;                         // RFC 9112 §3, §5: everything else is malformed
  }
}

HeadScan scan_request_head(std::string_view bytes, std::size_t max_head,
                           std::size_t max_target) noexcept {
  return HeadScanner{bytes, max_head}.request(max_target);
}

HeadScan scan_response_head(std::string_view bytes, std::size_t max_head) noexcept {
  return HeadScanner{bytes, max_head}.response();
}

Violation check_request_fields(const Fields& fields,
                               unsigned version) noexcept {
  if (const auto v = check_framing(fields, version, true); v != Violation::none) return v;
  for (const auto& f : fields) {
    if (is_framing_variant(f.name_string())) return Violation::framing_field_variant;
  }
  // RFC 9112 §3.2: 400 for an HTTP/1.1 request without Host, for any request with more than one
  // Host line, and for an invalid Host value.
  const auto hosts = fields.count(bhttp::field::host);
  if (hosts > 1) return Violation::repeated_host;
  if (hosts == 0) return version >= 11 ? Violation::missing_host : Violation::none;
  if (!valid_host(fields.find(bhttp::field::host)->value())) return Violation::bad_host;
  return Violation::none;
}

Violation check_response_fields(const Fields& fields) noexcept {
  return check_response_fields(fields, 11);
}

Violation check_response_fields(const Fields& fields,
                                unsigned version) noexcept {
  return check_framing(fields, version, false);
}

TargetAuthority target_authority(std::string_view target) noexcept {
  using Form = TargetAuthority::Form;
  if (target.empty() || target.front() == '/' || target == "*") return {};
  const auto sep = target.find("://");
  if (sep == std::string_view::npos) return {};  // not absolute-form; the target checks judge it
  const auto scheme = target.substr(0, sep);
  if (!boost::beast::iequals(scheme, "http") && !boost::beast::iequals(scheme, "https"))
    return {Form::bad, {}};
  auto authority = target.substr(sep + 3);
  authority = authority.substr(0, authority.find_first_of("/?#"));
  if (authority.empty() || authority.find('@') != std::string_view::npos || !valid_host(authority))
    return {Form::bad, {}};
  return {Form::ok, authority};
}

Violation violation_from_parser_error(const boost::system::error_code& ec,
                                      std::string_view head) noexcept {
  using bhttp::error;
  if (ec == error::bad_chunk || ec == error::bad_chunk_extension) return Violation::bad_chunk;
  if (ec == error::bad_content_length || ec == error::multiple_content_length) {
    return framing_violation(head, Violation::bad_content_length);
  }
  if (ec == error::bad_transfer_encoding) {
    return framing_violation(head, Violation::bad_transfer_encoding);
  }
  if (ec == error::header_limit) return Violation::head_too_large;
  if (ec == error::bad_method) return Violation::bad_method;
  if (ec == error::bad_target) return Violation::bad_target;
  if (ec == error::bad_version) return Violation::bad_version;
  if (ec == error::bad_status || ec == error::bad_reason) return Violation::bad_status_line;
  if (ec == error::bad_field) return Violation::bad_field_name;
  if (ec == error::bad_value) return Violation::bad_field_value;
  if (ec == error::bad_line_ending) return Violation::bare_cr;
  return Violation::none;
}

}  // namespace sluice::http
