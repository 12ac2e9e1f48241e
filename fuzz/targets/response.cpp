// (b) response_stream: the origin side of DownstreamSession, without sockets. Mirrors
// DownstreamSession::read_response_head (interim responses) and send_response (plan, rewrite, head, body
// relay, whether the upstream connection may be pooled); see src/proxy/downstream_session.cpp and
// proxy/response_relay.hpp.
#include <span>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>

#include "oracle/beast_head.hpp"
#include "sluice/http/chunked.hpp"
#include "sluice/http/head.hpp"
#include "sluice/http/intake.hpp"
#include "sluice/http/rewrite.hpp"
#include "targets/util.hpp"

namespace sluice::fuzz {

namespace {

namespace bhttp = boost::beast::http;
using boost::system::error_code;

constexpr std::size_t max_head = 4096;
constexpr std::size_t relay_size = 29;
constexpr std::string_view request_id = "fuzz-request-id";

struct Context {
  bool is_head = false;
  unsigned client_version = 11;
  bool client_keep_alive = false;
  unsigned attempts = 1;
};

struct Expected {
  unsigned status = 0;
  Lines fields;
  std::string body;
  bool keep_alive = false;  // sluice keeps the client connection open after it
};

// The client's view of what we sent: one response, equal to `want`, ending exactly at the end of
// `wire` (or at the close, when sluice closes after it).
void reparse(std::string_view wire, const Expected& want, const Context& ctx, bool interim) {
  const auto scan = http::scan_response_head(wire, wire.size() + 1);
  check(scan.result == http::HeadScan::Result::complete, "relayed head does not scan",
        http::describe(scan.violation));
  http::ResponseParser parser;
  check(http::parse_response_head(parser, wire.substr(0, scan.head_size), ctx.is_head),
        "relayed head is refused by our own rules");
  const auto& res = parser.get();
  check(res.result_int() == want.status, "status changed");
  const auto lines = lines_of(res);
  check(lines == want.fields, "fields changed", show(lines));
  for (const auto f : {bhttp::field::keep_alive, bhttp::field::te, bhttp::field::trailer,
                       bhttp::field::upgrade, bhttp::field::proxy_connection})
    check(res.count(f) == 0, "hop-by-hop field relayed", bhttp::to_string(f));
  if (interim) {
    check(parser.is_done(), "interim response with a body");
    check(wire.size() == scan.head_size, "bytes after an interim head");
    return;
  }
  check(!want.keep_alive || parser.keep_alive(), "client told to close, but we keep it open");
  check(want.keep_alive || !parser.keep_alive(), "client told to keep alive, but we close");
  check(!want.keep_alive || !parser.need_eof(), "kept-alive response framed by the close");

  std::string_view rest = wire.substr(scan.head_size);
  std::string body;
  char buf[61];
  while (!parser.is_done()) {
    parser.get().body().data = buf;
    parser.get().body().size = sizeof buf;
    error_code ec;
    std::size_t used = 0;
    if (rest.empty()) {
      parser.put_eof(ec);  // sluice closes here
    } else {
      used = parser.put(boost::asio::buffer(rest.data(), rest.size()), ec);
    }
    rest.remove_prefix(used);
    body.append(buf, sizeof buf - parser.get().body().size);
    if (ec == bhttp::error::need_buffer) continue;
    check(!ec, "relayed body does not parse", ec.message());
    check(used != 0 || parser.is_done(), "relayed body is incomplete");
  }
  check(body == want.body, "body changed");
  check(rest.empty(), "relayed bytes continue after the response", rest);
}

}  // namespace

void response_stream(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  Context ctx;
  ctx.is_head = (data[0] & 1) != 0;
  ctx.client_version = (data[0] & 2) != 0 ? 10 : 11;
  ctx.client_keep_alive = (data[0] & 4) != 0;
  ctx.attempts = (data[0] & 8) != 0 ? 2 : 1;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  static ExchangeArena arena;
  arena.reset();

  // DownstreamSession::read_response_head: interim responses, then the final one.
  std::optional<http::ResponseParser> parser;
  for (int interims = 0;; ++interims) {
    if (interims > 64) return;
    const auto scan = http::scan_response_head(in, max_head);
    if (scan.result != http::HeadScan::Result::complete) return;  // bad response or timeout: 502/504
    parser.emplace(std::piecewise_construct, std::make_tuple(), std::make_tuple(http::Allocator(arena.get())));
    if (!http::parse_response_head(*parser, in.substr(0, scan.head_size), ctx.is_head)) return;  // 502
    in.remove_prefix(scan.head_size);
    const auto code = parser->get().result_int();
    check(code >= 100 && code <= 599, "status out of range");
    if (code >= 200) break;
    if (code == 101) return;  // we never forward Upgrade: 502
    if (code != 100 && ctx.client_version == 11) {
      std::string wire;
      http::strip_hop_by_hop(parser->get());
      http::strip_origin_claims(parser->get(), code);
      http::append_interim_head(wire, parser->get());
      reparse(wire, {code, lines_of(parser->get()), {}, true}, ctx, true);
    }
  }

  // DownstreamSession::send_response
  auto& res = parser->get();
  const bool upstream_keep_alive = parser->keep_alive();
  const auto length = parser->content_length();
  const auto plan = http::plan_response(*parser, ctx.is_head, ctx.client_version, ctx.client_keep_alive);
  if (plan.refuse) return;  // 502 bad response
  http::rewrite_response(res, request_id);
  http::strip_origin_claims(res, res.result_int());
  std::string wire;
  http::append_response_head(wire, res, plan, ctx.client_version, ctx.attempts);

  Expected want;
  want.status = res.result_int();
  want.fields = lines_of(res);
  // Codings before chunked stay in the origin's Transfer-Encoding line (rewrite_response).
  if (plan.chunked_out && res.count(bhttp::field::transfer_encoding) == 0)
    want.fields.emplace_back("Transfer-Encoding", "chunked");
  if (ctx.attempts > 1) want.fields.emplace_back("Sluice-Attempts", std::to_string(ctx.attempts));
  if (!plan.keep_alive) want.fields.emplace_back("Connection", "close");
  else if (ctx.client_version == 10) want.fields.emplace_back("Connection", "keep-alive");
  want.keep_alive = plan.keep_alive;

  const auto relay = [&](std::string_view piece) {
    want.body.append(piece);
    if (plan.chunked_out && !piece.empty()) {
      wire.append(http::ChunkHeader(piece.size()).view());
      wire.append(piece);
      wire.append("\r\n");
    } else {
      wire.append(piece);
    }
  };
  // A chunked body: relay_response()'s read_chunked_piece() (proxy/body_relay.hpp), with every
  // byte the origin sent already read.
  http::ChunkedDecoder decoder({.max_line = 4096, .max_trailer = max_head});
  if (plan.body_expected) {
    if (plan.chunked_in) {
      char buf[relay_size];
      for (;;) {
        std::size_t have = 0;
        std::uint64_t decoded = 0;
        const auto f = http::feed_chunked(decoder, in, std::span(buf), have, decoded, 0, true);
        in.remove_prefix(f.consumed);
        using Outcome = http::ChunkedFeed::Outcome;
        // A malformed chunk (502, or the client connection closes), or the origin stopped before
        // the body ended (failed mid-stream): the upstream connection is not pooled.
        if (f.outcome == Outcome::invalid || f.outcome == Outcome::more) return;
        check(f.outcome != Outcome::some || have == relay_size || decoder.at_boundary(),
              "a piece left before its chunk's CRLF was validated");
        relay({buf, have});
        if (f.outcome == Outcome::done) break;
      }
    } else if (plan.until_close) {
      relay(in);  // then the origin closes
      in = {};
    } else {
      check(length.has_value(), "no length, not chunked, not until close");
      if (*length > in.size()) return;  // failed mid-stream
      relay(in.substr(0, *length));
      in.remove_prefix(*length);
    }
    if (plan.chunked_out) wire.append(http::last_chunk);
  }
  // The upstream connection may be pooled only after a complete, well-framed response with
  // nothing left over (DownstreamSession::send_response's return value).
  const bool reusable = upstream_keep_alive && !plan.until_close && in.empty();
  // (An incomplete body returned above: the session closes the connection then.)
  if (reusable) check(!parser->need_eof(), "pooled although the origin frames by its close");
  // A body only when one is expected: a HEAD's answer may say "chunked" and have none.
  if (reusable && plan.chunked_in && plan.body_expected) check(decoder.done(), "pooled before the last chunk");
  reparse(wire, want, ctx, false);
}

}  // namespace sluice::fuzz
