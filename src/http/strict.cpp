// Strict HTTP/1.1 head rules: a raw byte scan of a head, and the framing and Host checks over the
// fields it found (the head index runs both in one pass, head_index.cpp). The scan rejects on its
// own whatever two parsers could read differently, whatever parser is behind us, and gives every
// rejection one stable reason. What Beast's parser (the test oracle's, fuzz/oracle/) does with the
// same bytes is noted in fuzz/oracle/beast_head.cpp.
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
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/rfc7230.hpp>

#include "sluice/http/chars.hpp"
#include "sluice/http/head_scanner.hpp"

namespace sluice::http {

namespace {

namespace bhttp = boost::beast::http;
using namespace chars;

}  // namespace

// RFC 9110 §8.6: Content-Length = 1*DIGIT. We cap it at 2^63-1 so that it fits a signed 64-bit
// length anywhere downstream (RFC 9110 §8.6: recipients MUST guard against overflow).
std::optional<std::uint64_t> detail::parse_content_length(std::string_view value) noexcept {
  if (value.empty()) return std::nullopt;
  constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t n = 0;
  for (const char c : value) {
    if (!is(c, k_digit)) return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (n > (max - digit) / 10) return std::nullopt;
    n = n * 10 + digit;
  }
  return n;
}

namespace {

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

}  // namespace

// The rules that decide where the message ends (RFC 9112 §6.1, §6.3). A request may only be
// "chunked"; a response may carry codings before the final chunked.
Violation detail::check_framing(const FramingFacts& f, unsigned version, bool is_request) noexcept {
  // RFC 9112 §6.1: a message with both "ought to be handled as an error" (smuggling, §11.2).
  if (f.te_lines != 0 && f.cl_lines != 0) return Violation::content_length_with_transfer_encoding;
  if (f.te_lines != 0) {
    // Several TE lines are one list by RFC 9110 §5.3, but Beast and origins combine them
    // differently (Beast ignores all but the one that says chunked): refuse.
    if (f.te_lines > 1) return Violation::bad_transfer_encoding;
    // RFC 9112 §6.1: TE in HTTP/1.0 MUST be treated as faulty framing.
    if (version < 11) return Violation::bad_transfer_encoding;
    std::size_t codings = 0;
    if (!chunked_is_final(f.te, codings)) return Violation::bad_transfer_encoding;
    // A request's body is decoded here and re-chunked: a coding before chunked ("deflate,
    // chunked") is well-formed but one we do not handle (RFC 9112 §6.1 -> 501). Otherwise a
    // request says exactly "chunked": fewer accepted forms, fewer differentials.
    if (is_request && codings > 1) return Violation::unsupported_coding;
    if (is_request && !is_chunked(f.te)) return Violation::bad_transfer_encoding;
  }
  if (f.cl_lines != 0) {
    if (f.cl_lines > 1) return Violation::bad_content_length;
    if (!detail::parse_content_length(f.cl)) return Violation::bad_content_length;
  }
  return Violation::none;
}

namespace {

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
}  // namespace

bool detail::is_framing_variant(std::string_view name) noexcept {
  return name.find('_') != std::string_view::npos && is_framing_name(name);
}

namespace {

// RFC 9110 §7.2: Host = uri-host [ ":" port ]; RFC 3986 §3.2.2: uri-host = IP-literal /
// IPv4address / reg-name, where reg-name = *( unreserved / pct-encoded / sub-delims ).
}  // namespace

bool detail::valid_host(std::string_view value) noexcept {
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
    // The common host, a name or an IPv4 address: a run of reg-name bytes, taken a byte per
    // table lookup (the loop below checks '%' and ':' at every byte: ~150 instructions for
    // "127.0.0.1:8080", bench/callgrind.sh). It stops at anything else.
    while (i < value.size() && is(value[i], k_reg_name)) ++i;
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
    if (value[i] < '0' || value[i] > '9') return false;
  }
  return true;
}

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
  return detail::HeadScanner<>{bytes, max_head}.request(max_target);
}

HeadScan scan_response_head(std::string_view bytes, std::size_t max_head) noexcept {
  return detail::HeadScanner<>{bytes, max_head}.response();
}

Violation detail::check_request_facts(const FramingFacts& framing, bool framing_variant,
                                      std::size_t hosts, std::string_view host,
                                      unsigned version) noexcept {
  if (const auto v = check_framing(framing, version, true); v != Violation::none) return v;
  if (framing_variant) return Violation::framing_field_variant;
  // RFC 9112 §3.2: 400 for an HTTP/1.1 request without Host, for any request with more than one
  // Host line, and for an invalid Host value.
  if (hosts > 1) return Violation::repeated_host;
  if (hosts == 0) return version >= 11 ? Violation::missing_host : Violation::none;
  if (!valid_host(host)) return Violation::bad_host;
  return Violation::none;
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
  if (authority.empty() || authority.find('@') != std::string_view::npos || !detail::valid_host(authority))
    return {Form::bad, {}};
  return {Form::ok, authority};
}

}  // namespace sluice::http
