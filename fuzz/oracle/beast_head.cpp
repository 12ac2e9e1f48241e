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
