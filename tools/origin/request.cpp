#include "request.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <limits>

namespace sluice::origin {

void request::clear() {
  verb = http::verb::unknown;
  version = 11;
  expect_continue = false;
  has_transfer_encoding = false;
  body_bytes = 0;
  digest = nullptr;
  text.clear();
  method_size = 0;
  target_size = 0;
  fields.clear();
  header_count = 0;
}

void request::add_body(std::string_view bytes) {
  body_bytes += bytes.size();
  if (digest != nullptr) digest->update(bytes);
}

request_parser::request_parser(request& req) : req_(req) {
  // Uploads of any size are the point of `sink`; the default 1 MiB request limit would refuse them.
  body_limit(boost::none);
  // Echo tests send large headers on purpose; beyond this the answer is 431.
  header_limit(64 * 1024);
}

void request_parser::on_request_impl(http::verb method, string_view method_str, string_view target,
                                     int version, error_code&) {
  req_.verb = method;
  req_.version = version;
  req_.text.append(method_str.data(), method_str.size());
  req_.text.append(target.data(), target.size());
  req_.method_size = static_cast<std::uint32_t>(method_str.size());
  req_.target_size = static_cast<std::uint32_t>(target.size());
}

void request_parser::on_field_impl(http::field name, string_view name_string, string_view value,
                                   error_code&) {
  // The header is bounded by header_limit (64 KiB), so 32-bit offsets cannot overflow.
  const auto offset = static_cast<std::uint32_t>(req_.text.size());
  req_.text.append(name_string.data(), name_string.size());
  req_.text.append(value.data(), value.size());
  req_.fields.push_back({offset, static_cast<std::uint32_t>(name_string.size()),
                         static_cast<std::uint32_t>(value.size())});
  if (name == http::field::expect && boost::beast::iequals(value, "100-continue"))
    req_.expect_continue = true;
  else if (name == http::field::transfer_encoding)
    req_.has_transfer_encoding = true;
}

void request_parser::on_header_impl(error_code& ec) {
  req_.header_count = req_.fields.size();
  // RFC 9112 §6.3: a request whose Transfer-Encoding does not end in chunked has no reliable
  // length and must be refused; Beast would read it as body-less and the body as the next request.
  if (req_.has_transfer_encoding && !chunked()) ec = http::error::bad_transfer_encoding;
  // RFC 9110 §10.1.1: an HTTP/1.0 client does not understand 100 Continue.
  if (req_.version < 11) req_.expect_continue = false;
}

std::size_t request_parser::on_body_impl(string_view body, error_code&) {
  req_.add_body({body.data(), body.size()});
  return body.size();
}

std::size_t request_parser::on_chunk_body_impl(std::uint64_t, string_view body, error_code&) {
  req_.add_body({body.data(), body.size()});
  return body.size();
}

}  // namespace sluice::origin
