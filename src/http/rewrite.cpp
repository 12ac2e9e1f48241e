#include "sluice/http/rewrite.hpp"

#include <boost/beast/core/string.hpp>

namespace sluice::http {

namespace {

using boost::beast::iequals;

constexpr std::string_view k_request_id = "X-Request-Id";
constexpr std::size_t k_max_client_request_id = 128;

// RFC 9110 §7.6.1 lets a Connection option name any field, which makes the option a weapon:
// "Connection: Content-Length" would strip the length the origin frames the body by while we
// frame by it too (a desynchronised connection), and "Connection: Host" would send the request
// to the origin without the authority it was validated and routed with. X-Request-Id is ours:
// choose_request_id() may have handed out a view into it, and the id must reach the origin.
bool may_drop(std::string_view option) noexcept {
  return !iequals(option, "connection") && !iequals(option, "host") &&
         !iequals(option, "content-length") && !iequals(option, k_request_id);
}

}  // namespace

bool connection_may_drop(std::string_view option) noexcept { return may_drop(option); }

// It goes into our logs and to the origin verbatim.
bool sane_request_id(std::string_view id) noexcept {
  if (id.empty() || id.size() > k_max_client_request_id) return false;
  for (const char c : id) {
    if (c < 0x21 || c > 0x7E) return false;
  }
  return true;
}

bool is_h2c(std::string_view protocol) noexcept {
  return iequals(protocol.substr(0, protocol.find('/')), "h2c");
}

bool has_codings_before_chunked(std::string_view transfer_encoding) noexcept {
  return !transfer_encoding.empty() && !iequals(transfer_encoding, "chunked");
}

}  // namespace sluice::http
