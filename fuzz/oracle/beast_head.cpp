// The Beast path of the test oracle. What Beast 1.81's parser already does, measured by driving
// http::request_parser / response_parser with put() (pinned in tests/http/beast_parser_test.cpp,
// so a Boost upgrade that changes any of it fails a test).
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
// So the raw scan (src/http/strict.cpp) duplicates part of Beast on purpose. Where Beast still
// rejects first (framing conflicts, chunk sizes), violation_from_parser_error() maps its error to
// our Violation.
#include "oracle/beast_head.hpp"

#include <algorithm>
#include <charconv>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/verb.hpp>

#include "sluice/http/rewrite.hpp"

namespace sluice::http {

namespace bhttp = boost::beast::http;
using boost::system::error_code;

namespace {

constexpr std::string_view crlf = "\r\n";

void append_status_line(std::string& out, unsigned status, std::string_view reason) {
  out.append("HTTP/1.1 ");
  char code[4];
  std::to_chars(code, code + 3, status);  // 100..599: the scan refused anything else
  out.append(code, 3);
  out.push_back(' ');
  out.append(reason);
  out.append(crlf);
}

template <class Keep>
void append_fields_if(std::string& out, const Fields& fields, Keep keep) {
  for (const auto& f : fields) {
    if (!keep(f.name_string())) continue;
    out.append(f.name_string());
    out.append(": ");
    out.append(f.value());
    out.append(crlf);
  }
}

}  // namespace

Rejection parse_request_head(RequestParser& parser, std::string_view head) {
  // One byte of slack: Beast counts the limit against everything it buffered.
  parser.header_limit(static_cast<std::uint32_t>(head.size() + 1));
  parser.body_limit(boost::none);  // the session enforces max_body_bytes itself
  error_code ec;
  const auto used = parser.put(boost::asio::buffer(head.data(), head.size()), ec);
  if (ec || !parser.is_header_done() || used != head.size()) {
    const auto v = violation_from_parser_error(ec, head);
    return {400, v == Violation::none ? std::string_view("bad request") : describe(v)};
  }
  if (const auto v = check_request_fields(parser.get(), parser.get().version()); v != Violation::none)
    return {status_for(v), describe(v)};
  return {};
}

bool parse_response_head(ResponseParser& parser, std::string_view head, bool is_head) {
  parser.header_limit(static_cast<std::uint32_t>(head.size() + 1));
  parser.body_limit(boost::none);
  if (is_head) parser.skip(true);
  error_code ec;
  const auto used = parser.put(boost::asio::buffer(head.data(), head.size()), ec);
  return !ec && parser.is_header_done() && used == head.size() &&
         check_response_fields(parser.get(), parser.get().version()) == Violation::none;
}

Rejection admit_request(RequestParser& parser, std::uint64_t max_body_bytes) {
  auto& req = parser.get();
  if (const auto cl = parser.content_length(); cl && max_body_bytes != 0 && *cl > max_body_bytes)
    return {413, "body too large"};
  if (req.method() == bhttp::verb::connect) return {501, "method not supported"};
  const auto abs = target_authority(req.target());
  if (abs.form == TargetAuthority::Form::bad) return {400, "bad target"};
  if (abs.form == TargetAuthority::Form::ok) req.set(bhttp::field::host, abs.authority);
  return {};
}

ForwardShape shape_forward(RequestParser& parser, bool request_done) {
  auto& req = parser.get();
  ForwardShape shape;
  if (const auto e = req[bhttp::field::expect]; !e.empty()) {
    shape.expect_continue =
        boost::beast::iequals(e, "100-continue") && req.version() == 11 && !request_done;
    req.erase(bhttp::field::expect);
  }
  shape.chunked = parser.chunked();
  shape.upgrade =
      wants_upgrade(req, req.version(), req.method() == bhttp::verb::get, !request_done);
  return shape;
}

void append_fields(std::string& out, const Fields& fields) {
  append_fields_if(out, fields, [](std::string_view) { return true; });
}

void append_fields(std::string& out, const Fields& fields, const HeaderRules& rules,
                   const Variables& vars) {
  append_fields_if(out, fields, [&](std::string_view name) { return !rules.drops(name); });
  rules.append(out, vars);
}

void append_request_head(std::string& out, const RequestHeader& req, bool chunked,
                         const RequestEdits& edits) {
  append_request_line(out, req.method_string(), req.target(), edits.path,
                      req.count(bhttp::field::host) != 0);
  if (edits.rules != nullptr) {
    append_fields(out, req, *edits.rules, *edits.vars);
  } else {
    append_fields(out, req);
  }
  if (chunked) out.append("Transfer-Encoding: chunked\r\n");
  out.append(crlf);
}

void append_interim_head(std::string& out, const ResponseHeader& res) {
  append_status_line(out, res.result_int(), res.reason());
  append_fields(out, res);
  out.append(crlf);
}

ResponsePlan plan_response(const ResponseParser& parser, bool is_head, unsigned client_version,
                           bool client_keep_alive) {
  return detail::plan_response(parser.get().result_int(), parser.chunked(),
                               parser.content_length().has_value(),
                               parser.get()[bhttp::field::transfer_encoding], is_head,
                               client_version, client_keep_alive);
}

void append_response_head(std::string& out, const ResponseHeader& res, const ResponsePlan& plan,
                          unsigned client_version, unsigned attempts, const HeaderRules* rules,
                          const Variables* vars) {
  const auto reason = res.reason();
  append_status_line(out, res.result_int(), reason.empty() ? bhttp::obsolete_reason(res.result()) : reason);
  if (rules != nullptr) {
    append_fields(out, res, *rules, *vars);
  } else {
    append_fields(out, res);
  }
  // rewrite_response() kept a Transfer-Encoding only when it lists codings before chunked.
  if (plan.chunked_out && res.count(bhttp::field::transfer_encoding) == 0)
    out.append("Transfer-Encoding: chunked\r\n");
  if (attempts > 1) {
    out.append("Sluice-Attempts: ");
    out.push_back(static_cast<char>('0' + std::min(attempts, 9u)));
    out.append(crlf);
  }
  if (!plan.keep_alive) out.append("Connection: close\r\n");
  else if (client_version == 10) out.append("Connection: keep-alive\r\n");
  out.append(crlf);
}

}  // namespace sluice::http
