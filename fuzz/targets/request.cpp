// (a) request_stream: the client side of Session, without sockets. Mirrors
// Session::read_request_head (leading CRLFs, scan, parse), handle_request (413, CONNECT),
// forward (Expect, rewrite) and send_request (head, body relay); see src/proxy/session.cpp.
#include <cstring>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>

#include "sluice/config/config.hpp"
#include "sluice/http/head.hpp"
#include "sluice/http/request_id.hpp"
#include "sluice/http/rewrite.hpp"
#include "targets/util.hpp"

namespace sluice::fuzz {

namespace {

namespace bhttp = boost::beast::http;
using boost::system::error_code;

// Smaller than the defaults so that the 414/431 paths are reachable by short inputs.
constexpr std::size_t max_head = 4096;
constexpr std::size_t max_target = 1024;
constexpr std::uint64_t max_body = 64 * 1024;
// Small, so that a body takes several relay steps (the session's block is 64 KiB).
constexpr std::size_t relay_size = 29;

struct Expected {
  std::string method;
  std::string target;
  Lines fields;
  std::string body;
};

// What an origin behind us sees: the forwarded bytes, parsed with the same strict rules. They
// must be one complete request, equal to `want`, ending exactly at the end of `wire`.
void reparse(std::string_view wire, const Expected& want) {
  const auto scan = http::scan_request_head(wire, wire.size() + 1, wire.size() + 1);
  check(scan.result == http::HeadScan::Result::complete, "forwarded head does not scan",
        http::describe(scan.violation));
  check(scan.head_start == 0, "forwarded head starts with empty lines");
  http::RequestParser parser;
  const auto rejection = http::parse_request_head(parser, wire.substr(0, scan.head_size));
  check(!rejection, "forwarded head is refused by our own rules", rejection.reason);
  const auto& req = parser.get();
  check(req.version() == 11, "forwarded request is not HTTP/1.1");
  check(req.method_string() == want.method, "method changed", req.method_string());
  check(req.target() == want.target, "target changed", req.target());
  const auto lines = lines_of(req);
  check(lines == want.fields, "fields changed", show(lines));
  check(parser.keep_alive(), "forwarded request closes the origin connection");
  for (const auto f : {bhttp::field::connection, bhttp::field::keep_alive, bhttp::field::te,
                       bhttp::field::trailer, bhttp::field::upgrade, bhttp::field::proxy_connection})
    check(req.count(f) == 0, "hop-by-hop field forwarded", bhttp::to_string(f));

  // The body, framed only by what we wrote.
  std::string_view rest = wire.substr(scan.head_size);
  std::string body;
  char buf[61];
  while (!parser.is_done()) {
    parser.get().body().data = buf;
    parser.get().body().size = sizeof buf;
    error_code ec;
    const auto used = parser.put(boost::asio::buffer(rest.data(), rest.size()), ec);
    rest.remove_prefix(used);
    body.append(buf, sizeof buf - parser.get().body().size);
    if (ec == bhttp::error::need_buffer) continue;
    check(!ec, "forwarded body does not parse", ec.message());
    check(used != 0 || parser.is_done(), "forwarded body is incomplete");
  }
  check(body == want.body, "body changed");
  // Anything after the end would be a second request the origin sees and we never checked.
  check(rest.empty(), "forwarded bytes continue after the request", rest);
  if (!want.body.empty())
    check(parser.chunked() || parser.content_length().has_value(), "body without framing");
}

// One exchange from the head on. Returns false when the session would close the connection.
bool exchange(std::string_view& in, ExchangeArena& arena, http::RequestIdGenerator& ids) {
  // Session::read_request_head
  while (in.starts_with("\r\n")) in.remove_prefix(2);
  const auto scan = http::scan_request_head(in, max_head, max_target);
  if (scan.result == http::HeadScan::Result::need_more) return false;  // waits, then 408/close
  if (scan.result == http::HeadScan::Result::invalid) {
    const auto status = http::status_for(scan.violation);
    check(status == 400 || status == 414 || status == 431, "scan status");
    return false;
  }
  check(scan.head_start == 0, "empty lines left after skipping them");
  check(scan.head_size <= in.size() && scan.head_size <= max_head, "head size out of range");

  http::RequestParser parser(std::piecewise_construct, std::make_tuple(),
                             std::make_tuple(http::Allocator(arena.get())));
  if (const auto r = http::parse_request_head(parser, in.substr(0, scan.head_size))) {
    // 501: a transfer coding before chunked that sluice does not implement (RFC 9112 §6.1).
    check(r.status == 400 || r.status == 414 || r.status == 431 || r.status == 501,
          "rejection status");
    check(!r.reason.empty(), "rejection without a reason");
    return false;
  }
  in.remove_prefix(scan.head_size);
  auto& req = parser.get();

  // Session::handle_request
  char id_storage[129];
  std::string_view request_id;
  {
    char generated[37];
    const auto id = http::choose_request_id(req, ids, generated);
    const auto n = std::min(id.size(), sizeof id_storage);
    std::memcpy(id_storage, id.data(), n);
    request_id = std::string_view(id_storage, n);
  }
  const bool keep_alive = parser.keep_alive();
  if (const auto cl = parser.content_length(); cl && *cl > max_body) return false;  // 413
  if (req.method() == bhttp::verb::connect) return false;                             // 501

  // Session::forward
  if (!req[bhttp::field::expect].empty()) req.erase(bhttp::field::expect);
  const bool chunked = parser.chunked();
  http::rewrite_request(req, {"192.0.2.1", "http", request_id});

  Expected want;
  want.method = std::string(req.method_string());
  want.target = std::string(req.target());
  if (req.count(bhttp::field::host) == 0) want.fields.emplace_back("Host", "");  // HTTP/1.0
  for (auto& line : lines_of(req)) want.fields.push_back(std::move(line));
  if (chunked) want.fields.emplace_back("Transfer-Encoding", "chunked");

  // Session::send_request
  std::string wire;
  http::append_request_head(wire, req, chunked);
  if (chunked) {
    char relay[relay_size];
    while (!parser.is_done()) {
      req.body().data = relay;
      req.body().size = relay_size;
      error_code ec;
      const auto used = parser.put(boost::asio::buffer(in.data(), in.size()), ec);
      in.remove_prefix(used);
      if (ec == bhttp::error::need_buffer) ec = {};
      if (ec) {
        // need_more: the client stopped mid-body (408 later); anything else is a 400.
        return false;
      }
      const std::string_view piece(relay, relay_size - req.body().size);
      want.body.append(piece);
      if (want.body.size() > max_body) return false;  // 413
      if (!piece.empty()) {
        wire.append(http::ChunkHeader(piece.size()).view());
        wire.append(piece);
        wire.append("\r\n");
      }
      if (used == 0 && piece.empty() && !parser.is_done()) return false;
    }
    wire.append(http::last_chunk);
  } else {
    const auto length = parser.content_length().value_or(0);
    if (length > in.size()) return false;  // the client never sends the rest
    want.body = std::string(in.substr(0, length));
    wire.append(want.body);
    in.remove_prefix(length);
  }
  reparse(wire, want);
  return keep_alive;
}

}  // namespace

void request_stream(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  static ExchangeArena arena;
  http::RequestIdGenerator ids(1);
  while (!in.empty()) {
    const bool more = exchange(in, arena, ids);
    arena.reset();
    if (!more) break;
  }
}

}  // namespace sluice::fuzz
