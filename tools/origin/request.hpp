#pragma once
// One parsed request head plus its body accounting, and the Beast parser that fills it.
// A connection owns one `request` for its whole life and clears it between requests, so the
// arena and field index keep their capacity: steady-state requests allocate nothing.
// Touched only from the connection's own thread.

#include <boost/beast/http/basic_parser.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sha256.hpp"

namespace sluice::origin {

namespace http = boost::beast::http;

struct request {
  struct field_ref {
    std::uint32_t offset;
    std::uint32_t name_size;
    std::uint32_t value_size;
  };

  http::verb verb = http::verb::unknown;
  int version = 11;
  bool expect_continue = false;
  bool has_transfer_encoding = false;
  std::uint64_t body_bytes = 0;
  // Non-null only while the current request asked for `sink=sha256`.
  sha256* digest = nullptr;

  // Method, target and every field name and value, copied out of the read buffer so that the
  // buffer may be compacted while the request is still being answered.
  std::string text;
  std::uint32_t method_size = 0;
  std::uint32_t target_size = 0;
  // Header fields in received order, then chunked-body trailer fields (Beast reports both
  // through on_field_impl); the first header_count entries are the header.
  std::vector<field_ref> fields;
  std::size_t header_count = 0;

  void clear();
  void add_body(std::string_view bytes);

  std::string_view method() const { return std::string_view{text}.substr(0, method_size); }
  std::string_view target() const {
    return std::string_view{text}.substr(method_size, target_size);
  }
  std::string_view name(const field_ref& f) const {
    return std::string_view{text}.substr(f.offset, f.name_size);
  }
  std::string_view value(const field_ref& f) const {
    return std::string_view{text}.substr(f.offset + f.name_size, f.value_size);
  }
};

// Beast's strict HTTP/1.1 parser (RFC 9112 framing, CL/TE conflicts, chunked decoding) with the
// callbacks pointed at a `request`. Beast parsers cannot be reset, so a connection emplaces a
// fresh one per request; construction allocates nothing.
class request_parser final : public http::basic_parser<true> {
 public:
  explicit request_parser(request& req);

 private:
  // Beast's string_view is std::string_view or boost::core::string_view depending on
  // BOOST_BEAST_USE_STD_STRING_VIEW; spelling it as Beast does compiles either way.
  using string_view = boost::beast::string_view;
  using error_code = boost::system::error_code;

  void on_request_impl(http::verb method, string_view method_str, string_view target, int version,
                       error_code& ec) override;
  void on_response_impl(int, string_view, int, error_code&) override {}
  void on_field_impl(http::field name, string_view name_string, string_view value,
                     error_code& ec) override;
  void on_header_impl(error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  std::size_t on_body_impl(string_view body, error_code&) override;
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code&) override;
  void on_finish_impl(error_code&) override {}

  request& req_;
};

}  // namespace sluice::origin
