// (a) request_stream: the client side of DownstreamSession, without sockets. Every decision is the session's
// own function, called in the session's order: http/intake (next_head, admit_request,
// shape_forward, feed_chunked), http/head (parse_request_head, append_request_head) and
// http/rewrite. This file supplies only the I/O around them: a client whose bytes arrive in reads
// of a fixed size, and a string standing for what was written to the origin. On every path where
// the session refuses or abandons a request, it checks what that string holds.
#include <charconv>
#include <cstring>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>

#include "sluice/config/config.hpp"
#include "oracle/beast_head.hpp"
#include "sluice/http/head.hpp"
#include "sluice/http/intake.hpp"
#include "sluice/http/request_id.hpp"
#include "sluice/http/rewrite.hpp"
#include "targets/util.hpp"

namespace sluice::fuzz {

namespace {

namespace bhttp = boost::beast::http;
using boost::system::error_code;
using Outcome = http::ChunkedFeed::Outcome;

// Smaller than the defaults so that the 413/414/431 paths are reachable by short inputs.
constexpr std::size_t max_head = 4096;
constexpr std::size_t max_target = 1024;
constexpr std::uint64_t max_body = 64 * 1024;
// Small, so that a chunked body outgrows it and streams (the session's relay is 64 KiB).
constexpr std::size_t relay_size = 29;

// The client connection: `all` is everything it will ever send, of which `buffered` bytes were
// read so far (DownstreamSession::in_); a read brings `read_size` more.
struct Client {
  std::string_view all;
  std::size_t read_size;
  std::size_t buffered = 0;
  std::string_view view() const { return all.substr(0, buffered); }
  void consume(std::size_t n) {
    all.remove_prefix(n);
    buffered -= n;
  }
  // False when the client sent nothing more: the session waits, then answers 408 or closes.
  bool read() {
    if (buffered == all.size()) return false;
    buffered = std::min(all.size(), buffered + read_size);
    return true;
  }
};

struct Expected {
  std::string method;
  std::string target;
  Lines fields;
  std::string body;
  bool upgrade = false;
};

// The origin's parse of a forwarded head: one HTTP/1.1 head under our own strict rules, with the
// method, target and fields we meant to send, and no hop-by-hop field but an upgrade's own.
std::size_t check_head(std::string_view wire, http::RequestParser& parser, const Expected& want) {
  const auto scan = http::scan_request_head(wire, wire.size() + 1, wire.size() + 1);
  check(scan.result == http::HeadScan::Result::complete, "forwarded head does not scan",
        http::describe(scan.violation));
  check(scan.head_start == 0, "forwarded head starts with empty lines");
  const auto rejection = http::parse_request_head(parser, wire.substr(0, scan.head_size));
  check(!rejection, "forwarded head is refused by our own rules", rejection.reason);
  const auto& req = parser.get();
  check(req.version() == 11, "forwarded request is not HTTP/1.1");
  check(req.method_string() == want.method, "method changed", req.method_string());
  check(req.target() == want.target, "target changed", req.target());
  check(http::target_authority(req.target()).form != http::TargetAuthority::Form::bad,
        "a target we refuse was forwarded", req.target());
  const auto lines = lines_of(req);
  check(lines == want.fields, "fields changed", show(lines));
  check(parser.keep_alive(), "forwarded request closes the origin connection");
  for (const auto f : {bhttp::field::connection, bhttp::field::keep_alive, bhttp::field::te,
                       bhttp::field::trailer, bhttp::field::upgrade, bhttp::field::proxy_connection}) {
    const bool upgrade_field = f == bhttp::field::connection || f == bhttp::field::upgrade;
    check(req.count(f) == 0 || (want.upgrade && upgrade_field), "hop-by-hop field forwarded",
          bhttp::to_string(f));
  }
  return scan.head_size;
}

// The origin's parse of the body after the head, framed only by what we wrote. Returns whether
// the request is complete; `rest` is left with what the parser did not take.
bool parse_body(http::RequestParser& parser, std::string_view& rest, std::string& body) {
  char buf[61];
  while (!parser.is_done()) {
    parser.get().body().data = buf;
    parser.get().body().size = sizeof buf;
    error_code ec;
    const auto used = parser.put(boost::asio::buffer(rest.data(), rest.size()), ec);
    rest.remove_prefix(used);
    body.append(buf, sizeof buf - parser.get().body().size);
    if (ec == bhttp::error::need_buffer) continue;
    if (ec == bhttp::error::need_more || (!ec && used == 0)) return false;  // unfinished
    check(!ec, "forwarded body does not parse", ec.message());
  }
  return true;
}

// A forwarded request: one complete request, equal to `want`, ending exactly at the end of what
// we wrote (anything after it would be a second request the origin sees and we never checked).
void check_forwarded(std::string_view wire, const Expected& want) {
  http::RequestParser parser;
  std::string_view rest = wire.substr(check_head(wire, parser, want));
  std::string body;
  check(parse_body(parser, rest, body), "forwarded body is incomplete");
  check(body == want.body, "body changed");
  check(rest.empty(), "forwarded bytes continue after the request", rest);
  if (!want.body.empty())
    check(parser.chunked() || parser.content_length().has_value(), "body without framing");
}

// A request the session refused or abandoned after `wire` had left for the origin: the origin
// must not be able to take it for a complete request, nothing may follow it, and its body is a
// prefix of the bytes validated before the failure (nothing from the bad byte on left).
void check_abandoned(std::string_view wire, const Expected& want, std::string_view validated) {
  if (wire.empty()) return;
  http::RequestParser parser;
  std::string_view rest = wire.substr(check_head(wire, parser, want));
  std::string body;
  check(!parse_body(parser, rest, body), "a refused request reached the origin complete");
  // Beast holds back a chunk's closing CRLF until the next chunk-size line arrives.
  check(rest.empty() || (parser.chunked() && rest == "\r\n"),
        "bytes the origin cannot parse follow a refused request", rest);
  check(validated.starts_with(body), "the origin got body bytes that were never validated");
}

enum class Body { forwarded, refused };

// DownstreamSession::keep_body and the Content-Length half of send_request/stream_request. A body that fits
// what the session keeps for replay is read whole before anything is sent; a longer one streams.
Body content_length_body(Client& client, std::string& wire, Expected& want, std::uint64_t length) {
  const config::RetryConfig retry;  // the defaults: attempts and replay buffer
  const bool kept = retry.attempts > 1 && length <= std::min<std::uint64_t>(retry.buffer, relay_size);
  while (client.buffered < length) {
    if (client.read()) continue;
    // The client stopped mid-body: 408. A kept body sent nothing; a streamed one sent its start.
    if (!kept) wire.append(client.view());
    check_abandoned(kept ? std::string_view() : std::string_view(wire), want, client.view());
    return Body::refused;
  }
  want.body = std::string(client.view().substr(0, length));
  wire.append(want.body);
  client.consume(length);
  return Body::forwarded;
}

// DownstreamSession::decode_chunked: feeds until the decoder has something for the caller.
Outcome decode_chunked(Client& client, http::ChunkedDecoder& decoder, char* relay, std::size_t& have,
                       std::uint64_t& bytes_in, bool flush) {
  for (;;) {
    const auto f = http::feed_chunked(decoder, client.view(), std::span(relay, relay_size), have,
                                      bytes_in, max_body, flush);
    client.consume(f.consumed);
    if (f.outcome == Outcome::invalid) {
      const auto status = http::status_for(f.violation);
      check(status == 400 || status == 413 || status == 431, "chunked rejection status");
    }
    if (f.outcome != Outcome::more) return f.outcome;
    if (!client.read()) return Outcome::more;  // the client stopped: 408
  }
}

// DownstreamSession::keep_chunked_body, then stream_request's chunked half when the body outgrew the relay.
Body chunked_body(Client& client, http::RequestParser& parser, std::string& wire, Expected& want) {
  http::ChunkedDecoder decoder({.max_line = 4096, .max_trailer = max_head});
  char relay[relay_size];
  std::size_t have = 0;
  std::uint64_t bytes_in = 0;
  auto outcome = decode_chunked(client, decoder, relay, have, bytes_in, false);
  check(outcome != Outcome::done || decoder.done(), "a body the decoder did not finish was forwarded");
  if (outcome == Outcome::done) {
    // Kept whole: forwarded with a Content-Length, its trailer fields dropped.
    char length[24];
    const auto r = std::to_chars(length, length + sizeof length, have);
    parser.get().set(bhttp::field::content_length, std::string_view(length, r.ptr - length));
    want.fields = lines_of(parser.get());
    want.body.assign(relay, have);
    http::append_request_head(wire, parser.get(), false);
    wire.append(want.body);
    return Body::forwarded;
  }
  std::string validated(relay, have);  // every byte the decoder produced, for the origin check
  if (outcome != Outcome::some) {
    check_abandoned(wire, want, validated);  // nothing was sent
    return Body::refused;
  }
  want.fields.emplace_back("Transfer-Encoding", "chunked");
  http::append_request_head(wire, parser.get(), true);
  for (;;) {
    if (have > 0) {
      // Each chunk leaves only after its data and CRLF were validated; a chunk larger than the
      // relay leaves in relay-sized pieces.
      check(decoder.at_boundary() || have == relay_size, "a chunk left before its CRLF was validated");
      want.body.append(relay, have);
      wire.append(http::ChunkHeader(have).view()).append(relay, have).append("\r\n");
    }
    if (outcome == Outcome::done) {
      check(decoder.done(), "a body the decoder did not finish was forwarded");
      wire.append(http::last_chunk);
      return Body::forwarded;
    }
    have = 0;
    outcome = decode_chunked(client, decoder, relay, have, bytes_in, true);
    validated.append(relay, have);
    if (outcome != Outcome::some && outcome != Outcome::done) {
      check_abandoned(wire, want, validated);
      return Body::refused;
    }
  }
}

// One exchange from the head on. Returns false when the session would close the connection.
bool exchange(Client& client, ExchangeArena& arena, http::RequestIdGenerator& ids) {
  // DownstreamSession::read_request_head
  http::HeadStep step;
  for (;;) {
    step = http::next_head(client.view(), max_head, max_target);
    client.consume(step.skipped);
    if (step.scan.result != http::HeadScan::Result::need_more) break;
    if (!client.read()) return false;  // waits, then 408 or a silent close
  }
  const auto& scan = step.scan;
  if (scan.result == http::HeadScan::Result::invalid) {
    const auto status = http::status_for(scan.violation);
    check(status == 400 || status == 414 || status == 431, "scan status");
    return false;
  }
  check(scan.head_start == 0, "empty lines left after skipping them");
  check(scan.head_size <= client.buffered && scan.head_size <= max_head, "head size out of range");

  http::RequestParser parser(std::piecewise_construct, std::make_tuple(),
                             std::make_tuple(http::Allocator(arena.get())));
  if (const auto r = http::parse_request_head(parser, client.view().substr(0, scan.head_size))) {
    // 501: a transfer coding before chunked that sluice does not implement (RFC 9112 §6.1).
    check(r.status == 400 || r.status == 414 || r.status == 431 || r.status == 501,
          "rejection status");
    check(!r.reason.empty(), "rejection without a reason");
    return false;
  }
  client.consume(scan.head_size);
  auto& req = parser.get();

  // DownstreamSession::handle_request
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
  const bool request_done = parser.is_done();
  if (const auto r = http::admit_request(parser, max_body)) {
    check(r.status == 400 || r.status == 413 || r.status == 501, "admission status");
    return false;
  }

  // DownstreamSession::forward
  const auto shape = http::shape_forward(parser, request_done);
  http::rewrite_request(req, {"192.0.2.1", "http", request_id, shape.upgrade});
  Expected want;
  want.method = std::string(req.method_string());
  want.target = std::string(req.target());
  want.upgrade = shape.upgrade;
  if (req.count(bhttp::field::host) == 0) want.fields.emplace_back("Host", "");  // HTTP/1.0
  for (auto& line : lines_of(req)) want.fields.push_back(std::move(line));

  // DownstreamSession::send_request (the head waits for the first piece of a streamed body)
  std::string wire;
  if (shape.chunked) {
    if (chunked_body(client, parser, wire, want) == Body::refused) return false;
  } else {
    http::append_request_head(wire, req, false);
    if (!request_done &&
        content_length_body(client, wire, want, *parser.content_length()) == Body::refused)
      return false;
  }
  check_forwarded(wire, want);
  return keep_alive && !shape.upgrade;  // an upgrade's 101 ends the HTTP exchanges
}

void run(std::string_view bytes, std::size_t read_size) {
  static ExchangeArena arena;
  http::RequestIdGenerator ids(1);
  Client client{bytes, read_size};
  while (client.buffered > 0 || client.read()) {
    const bool more = exchange(client, arena, ids);
    arena.reset();
    if (!more) break;
  }
}

}  // namespace

void request_stream(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  run(bytes, 16 * 1024);  // one read brings what the session asks for (read_chunk)
  run(bytes, 7);          // the bytes trickle: heads and chunks end between reads
}

}  // namespace sluice::fuzz
