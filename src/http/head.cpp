#include "sluice/http/head.hpp"

#include "sluice/http/rewrite.hpp"

#include <algorithm>
#include <charconv>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/status.hpp>

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

void append_fields(std::string& out, const Fields& fields) {
  append_fields_if(out, fields, [](std::string_view) { return true; });
}

void append_fields(std::string& out, const Fields& fields, const HeaderRules& rules,
                   const Variables& vars) {
  append_fields_if(out, fields, [&](std::string_view name) { return !rules.drops(name); });
  rules.append(out, vars);
}

void append_request_line(std::string& out, std::string_view method, std::string_view target,
                         const PathRewrite* path, bool has_host) {
  if (path != nullptr) {
    append_joined(out, {method, " "});
    append_rewritten_target(out, target, *path);
    out.append(" HTTP/1.1\r\n");
  } else {
    append_joined(out, {method, " ", target, " HTTP/1.1\r\n"});
  }
  if (!has_host) out.append("Host: \r\n");
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

ResponsePlan detail::plan_response(unsigned status, bool chunked, bool has_content_length,
                                   std::string_view transfer_encoding, bool is_head,
                                   unsigned client_version, bool client_keep_alive) noexcept {
  ResponsePlan p;
  p.body_expected = !is_head && status != 204 && status != 304;
  p.chunked_in = chunked;
  p.until_close = p.body_expected && !p.chunked_in && !has_content_length;
  const bool unknown_length = p.body_expected && (p.chunked_in || p.until_close);
  p.chunked_out = unknown_length && client_version == 11;
  p.refuse = p.body_expected && p.chunked_in && client_version != 11 &&
             has_codings_before_chunked(transfer_encoding);
  // An HTTP/1.0 client learns where such a body ends only from the close.
  p.keep_alive = client_keep_alive && !(unknown_length && client_version != 11);
  return p;
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

ChunkHeader::ChunkHeader(std::size_t n) noexcept {
  auto r = std::to_chars(data, data + 16, n, 16);
  r.ptr[0] = '\r';
  r.ptr[1] = '\n';
  size = static_cast<std::size_t>(r.ptr + 2 - data);
}

bool is_idempotent(bhttp::verb m) noexcept {
  return m == bhttp::verb::get || m == bhttp::verb::head || m == bhttp::verb::options ||
         m == bhttp::verb::trace || m == bhttp::verb::put || m == bhttp::verb::delete_;
}

std::string_view path_of(std::string_view target) noexcept {
  if (!target.empty() && target.front() == '/') return target;
  const auto scheme = target.find("://");
  if (scheme == std::string_view::npos) return target;
  const auto slash = target.find('/', scheme + 3);
  return slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
}

std::optional<std::chrono::seconds> keep_alive_timeout(std::string_view value) noexcept {
  const auto at = value.find("timeout=");
  if (at == std::string_view::npos) return std::nullopt;
  unsigned long seconds = 0;
  const auto begin = value.data() + at + 8;
  const auto r = std::from_chars(begin, value.data() + value.size(), seconds);
  if (r.ec != std::errc() || r.ptr == begin) return std::nullopt;
  return std::chrono::seconds(std::min<unsigned long>(seconds, 86400));
}

}  // namespace sluice::http
