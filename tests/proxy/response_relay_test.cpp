// The response relay (relay_response, response_relay.hpp) on beast::test::stream: a
// Content-Length, chunked or read-to-close body in pieces of every size reaches the client as it
// came or re-chunked; a malformed chunk is a bad response before any of its bytes left; every
// origin read and every client write failing in turn until the relay passes; what makes the
// upstream connection reusable.
#include "sluice/proxy/response_relay.hpp"

#include "run_to_end.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/buffers_prefix.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/asio/write.hpp>

namespace sluice::proxy {
namespace {

namespace net = boost::asio;
namespace test = boost::beast::test;
using boost::system::error_code;

// What the hooks saw, kept outside them (relay_response takes its hooks by value).
struct Seen {
  std::string body;  // the pieces sent() was told of, decoded
  int reads = 0;
  int writes = 0;
  bool head_reached = false;
  bool refused = false;
  std::optional<FailureKind> body_failure;
  bool head_written_at_failure = false;
  bool client_failed = false;
  bool done = false;
  // The client's room: the waits it asks for before it has room, the relay it gives back after
  // each, and the error of the wait.
  int room_waits_left = 0;
  int room_waits = 0;
  std::size_t room_asked = 0;
  std::span<char> other_block;
  error_code room_error;
};

struct Hooks {
  Seen* seen;
  void reading() { ++seen->reads; }
  void writing() { ++seen->writes; }
  error_code timed(error_code ec) const { return ec; }
  void sent(std::string_view piece) { seen->body.append(piece); }
  void head_reached() { seen->head_reached = true; }
  net::awaitable<void> refused() {
    seen->refused = true;
    co_return;
  }
  net::awaitable<void> body_failed(error_code, bool head_written, FailureKind failure) {
    seen->body_failure = failure;
    seen->head_written_at_failure = head_written;
    co_return;
  }
  void client_failed(boost::system::error_code) { seen->client_failed = true; }
  bool client_has_room(std::size_t n) {
    seen->room_asked = n;
    if (seen->room_waits_left == 0) return true;
    --seen->room_waits_left;
    return false;
  }
  net::awaitable<void> wait_client_room(std::span<char>& relay, error_code& ec) {
    ++seen->room_waits;
    relay = seen->other_block;
    ec = seen->room_error;
    co_return;
  }
  void done() { seen->done = true; }
};

const std::string head = "HTTP/1.1 200 OK\r\nX-Origin: a\r\n";  // as the session rewrote it

http::ResponsePlan plan(bool chunked_in, bool chunked_out, bool until_close = false) {
  http::ResponsePlan p;
  p.body_expected = true;
  p.chunked_in = chunked_in;
  p.chunked_out = chunked_out;
  p.until_close = until_close;
  p.keep_alive = !until_close;
  return p;
}

struct Relay {
  net::io_context io;
  test::stream upstream;
  test::stream origin_side{io};  // the origin's end: closing it is the origin's EOF
  test::stream client{io};
  test::stream client_peer{io};  // what reached the client
  boost::beast::flat_buffer in{64 * 1024};
  std::array<char, 16> relay{};  // small: a body of any size goes in several pieces
  http::ChunkedDecoder chunked;  // fresh: one response per Relay
  std::string out_head;
  Seen seen;

  explicit Relay(const std::string& wire, std::size_t read_size = 1 << 20)
      : upstream(io, wire) {
    upstream.read_size(read_size);
    upstream.connect(origin_side);
    client.connect(client_peer);
  }
  Relay(const std::string& wire, test::fail_count& fc, bool fail_writes) : upstream(io, fail_writes ? wire : "") {
    if (fail_writes) {
      client = test::stream(io, fc);
    } else {
      upstream = test::stream(io, fc, wire);
    }
    upstream.read_size(7);
    upstream.connect(origin_side);
    client.connect(client_peer);
    client.write_size(5);
  }

  std::optional<bool> run(ResponseFraming framing) {
    out_head = head;
    return test_support::run_to_end(
        io, relay_response(Hooks{&seen}, upstream, in, client, framing, out_head, std::span(relay), chunked));
  }
  std::string received() const { return client_peer.str(); }
};

ResponseFraming framing(http::ResponsePlan p, std::uint64_t length = 0, bool reusable = true) {
  ResponseFraming f;
  f.plan = p;
  f.content_length = length;
  f.reusable = reusable;
  return f;
}

const std::string body = "The quick brown fox jumps over the lazy dog, twice over.";

// The body in three chunks (5, 26 and the rest: 0x19), one with an extension, and a trailer field.
std::string chunked_wire() {
  return "5\r\n" + body.substr(0, 5) + "\r\n1a;ext=1\r\n" + body.substr(5, 26) + "\r\n19\r\n" +
         body.substr(31) + "\r\n0\r\nX-Checksum: x\r\n\r\n";
}

TEST(RelayResponse, AContentLengthBodyInPiecesOfEverySizeReachesTheClientAsItCame) {
  for (std::size_t piece = 1; piece <= body.size(); ++piece) {
    Relay r(body, piece);
    const auto reusable = r.run(framing(plan(false, false), body.size()));
    ASSERT_TRUE(reusable) << "pieces of " << piece;
    EXPECT_TRUE(*reusable);
    EXPECT_EQ(r.received(), head + body) << "pieces of " << piece;
    EXPECT_EQ(r.seen.body, body);
    EXPECT_TRUE(r.seen.done);
    EXPECT_EQ(r.in.size(), 0u);
  }
}

// A small body that came with its head is appended to the head: one write.
TEST(RelayResponse, ABufferedSmallBodyLeavesWithItsHeadInOneWrite) {
  Relay r("");
  net::buffer_copy(r.in.prepare(body.size()), net::buffer(body));
  r.in.commit(body.size());
  ASSERT_EQ(r.run(framing(plan(false, false), body.size())), true);
  EXPECT_EQ(r.received(), head + body);
  EXPECT_EQ(r.seen.writes, 1);
  EXPECT_EQ(r.seen.reads, 0);
  EXPECT_EQ(r.in.size(), 0u);
}

TEST(RelayResponse, AChunkedBodyInPiecesOfEverySizeIsDecodedAndReChunkedOrSentPlain) {
  const auto wire = chunked_wire();
  for (std::size_t piece = 1; piece <= wire.size(); ++piece) {
    for (const bool chunked_out : {true, false}) {
      Relay r(wire, piece);
      // To an HTTP/1.0 client the decoded body goes as it is, and the connection ends with it.
      const auto reusable = r.run(framing(plan(true, chunked_out, !chunked_out)));
      ASSERT_TRUE(reusable) << "pieces of " << piece;
      EXPECT_EQ(*reusable, chunked_out) << "pieces of " << piece;
      EXPECT_EQ(r.seen.body, body) << "pieces of " << piece;
      EXPECT_TRUE(r.seen.done);
      EXPECT_FALSE(r.seen.body_failure) << static_cast<int>(r.seen.body_failure.value_or(FailureKind::none));
      EXPECT_FALSE(r.seen.client_failed);
      const auto got = r.received();
      ASSERT_EQ(got.substr(0, head.size()), head);
      if (!chunked_out) {
        EXPECT_EQ(got.substr(head.size()), body);
        continue;
      }
      // Re-chunked: decoding what the client got gives the body back, extensions and trailer
      // fields dropped.
      http::ChunkedDecoder decoder;
      std::string decoded(body.size() + 1, '\0');
      const auto step = decoder.feed(std::string_view(got).substr(head.size()), std::span(decoded));
      EXPECT_EQ(step.status, http::ChunkedDecoder::Status::done) << "pieces of " << piece;
      EXPECT_EQ(decoded.substr(0, step.produced), body);
      EXPECT_EQ(got.find("ext=1"), std::string::npos);
      EXPECT_EQ(got.find("X-Checksum"), std::string::npos);
    }
  }
}

// What follows the last chunk belongs to no request of ours: the connection is not reused.
TEST(RelayResponse, BytesAfterTheBodyMakeTheConnectionNotReusable) {
  Relay r(chunked_wire() + "HTTP/1.1 200 OK\r\n");
  EXPECT_EQ(r.run(framing(plan(true, true))), false);
  EXPECT_EQ(r.seen.body, body);
  EXPECT_TRUE(r.seen.done);
}

// A chunk's data leaves only after its CRLF was validated: the bad chunk is a bad response, and
// when nothing had left yet the answer is still the session's (head_written false: a 502).
TEST(RelayResponse, AMalformedChunkIsABadResponseBeforeAnyOfItsBytesLeft) {
  for (std::size_t piece = 1; piece <= 12; ++piece) {
    Relay r("5\r\nhelloXX0\r\n\r\n", piece);
    EXPECT_EQ(r.run(framing(plan(true, true))), false);
    ASSERT_EQ(r.seen.body_failure, FailureKind::bad_response) << "pieces of " << piece;
    EXPECT_FALSE(r.seen.head_written_at_failure);
    EXPECT_EQ(r.received(), "") << "pieces of " << piece;
    EXPECT_FALSE(r.seen.done);
  }
  // A good chunk that came in a read of its own went out with the head; the bad one after it
  // did not. In one read together, neither goes (above: nothing from the bad chunk's read).
  Relay r("3\r\nabc\r\nzz\r\n", 8);  // "zz": not a chunk size
  EXPECT_EQ(r.run(framing(plan(true, false, true))), false);
  EXPECT_EQ(r.seen.body_failure, FailureKind::bad_response);
  EXPECT_TRUE(r.seen.head_written_at_failure);
  EXPECT_EQ(r.received(), head + "abc");
}

TEST(RelayResponse, ABodyReadToTheCloseEndsAtTheOriginsEndOfStream) {
  Relay r(body, 9);
  r.origin_side.close();
  EXPECT_EQ(r.run(framing(plan(false, false, true))), false);  // never reused
  EXPECT_EQ(r.received(), head + body);
  EXPECT_TRUE(r.seen.done);
}

TEST(RelayResponse, EndOfStreamBeforeTheContentLengthIsAResetAfterTheHeadLeft) {
  Relay r(body.substr(0, 20), 9);
  r.origin_side.close();
  EXPECT_EQ(r.run(framing(plan(false, false), body.size())), false);
  EXPECT_EQ(r.seen.body_failure, FailureKind::reset_after_send);
  EXPECT_TRUE(r.seen.head_written_at_failure);
  EXPECT_EQ(r.received(), head + body.substr(0, 20));
}

TEST(RelayResponse, ARefusedFramingIsAnsweredByTheSessionAndNothingIsRelayed) {
  Relay r(body);
  auto p = plan(true, false);
  p.refuse = true;
  EXPECT_EQ(r.run(framing(p)), false);
  EXPECT_TRUE(r.seen.refused);
  EXPECT_EQ(r.received(), "");
  EXPECT_EQ(r.seen.reads, 0);
}

TEST(RelayResponse, ABodilessResponseIsItsHeadAlone) {
  Relay r("");
  auto p = plan(false, false);
  p.body_expected = false;
  EXPECT_EQ(r.run(framing(p, 5)), true);
  EXPECT_EQ(r.received(), head);
  EXPECT_EQ(r.seen.reads, 0);
}

// The answer to a HEAD says "chunked" but has no body (RFC 9110 §9.3.2): nothing is read for it,
// no last-chunk is awaited, and the connection is reusable (fuzz_response's invariant had missed
// this case: fuzz/regressions/response/head-answered-chunked).
TEST(RelayResponse, AChunkedAnswerToAHeadHasNoBodyAndItsConnectionIsReusable) {
  Relay r("");
  // As plan_response() plans it: no body expected, so nothing to re-chunk either.
  auto p = http::detail::plan_response(200, true, false, "chunked", true, 11, true);
  ASSERT_TRUE(p.chunked_in);
  ASSERT_FALSE(p.body_expected || p.chunked_out);
  EXPECT_EQ(r.run(framing(p)), true);
  EXPECT_EQ(r.received(), head);
  EXPECT_EQ(r.seen.reads, 0);
}

// Every origin read fails in turn until none does: a failing run is a reset after the request
// was sent (never a bad response), and the client got a prefix of the answer, never more.
TEST(RelayResponse, FailEveryOriginReadInTurnUntilItSucceeds) {
  const auto wire = chunked_wire();
  bool passed = false;
  for (std::size_t n = 0; n < 100 && !passed; ++n) {
    test::fail_count fc(n);
    Relay r(wire, fc, false);
    const auto reusable = r.run(framing(plan(true, true)));
    ASSERT_TRUE(reusable) << "point " << n;
    if (r.seen.body_failure) {
      EXPECT_EQ(*r.seen.body_failure, FailureKind::reset_after_send) << "point " << n;
      EXPECT_FALSE(*reusable);
      EXPECT_EQ(body.substr(0, r.seen.body.size()), r.seen.body) << "point " << n;
      continue;
    }
    EXPECT_TRUE(*reusable);
    EXPECT_EQ(r.seen.body, body);
    EXPECT_GT(n, 0u);
    passed = true;
  }
  EXPECT_TRUE(passed);
}

// Every client write fails in turn until none does: a failing run is the client's failure (the
// connection is not reused: the origin's body was not read to its end), never the origin's.
TEST(RelayResponse, FailEveryClientWriteInTurnUntilItSucceeds) {
  bool passed = false;
  for (std::size_t n = 0; n < 100 && !passed; ++n) {
    test::fail_count fc(n);
    Relay r(body, fc, true);
    const auto reusable = r.run(framing(plan(false, false), body.size()));
    ASSERT_TRUE(reusable) << "point " << n;
    EXPECT_FALSE(r.seen.body_failure) << "point " << n;
    if (r.seen.client_failed) {
      EXPECT_FALSE(*reusable);
      EXPECT_FALSE(r.seen.done);
      EXPECT_EQ((head + body).substr(0, r.received().size()), r.received()) << "point " << n;
      continue;
    }
    EXPECT_TRUE(*reusable);
    EXPECT_EQ(r.received(), head + body);
    EXPECT_GT(n, 0u);
    passed = true;
  }
  EXPECT_TRUE(passed);
}

// An origin with try_read_some (tls::Stream's): its non-blocking read takes what the test stream
// holds (at most its read size), or nothing when `dry` (a drained socket); every read that goes
// through the scheduler instead (async_read_some) is counted.
struct TryReadOrigin {
  test::stream& stream;
  bool dry = false;
  int tries = 0;
  int async_reads = 0;

  using executor_type = test::stream::executor_type;
  executor_type get_executor() { return stream.get_executor(); }
  std::size_t try_read_some(net::mutable_buffer buffer) {
    ++tries;
    if (dry || stream.str().empty()) return 0;
    error_code ec;
    const auto n = stream.read_some(buffer, ec);
    return ec ? 0 : n;
  }
  template <class Buffers, class Token>
  auto async_read_some(const Buffers& buffers, Token&& token) {
    ++async_reads;
    return stream.async_read_some(buffers, std::forward<Token>(token));
  }
};

// A body that keeps coming is read at once, piece after piece, without a trip through the
// scheduler (and without a deadline, which only a wait needs), but goes through it again after
// every max_pieces_read_now pieces, so that a long body cannot hold the worker.
TEST(RelayResponse, ABodyThatKeepsComingIsReadAtOnceAndYieldsEveryFewPieces) {
  const auto pieces = 3 * max_pieces_read_now + 2;
  const std::string long_body(pieces * 16, 'x');  // 16: the relay's size here
  for (const bool chunked : {false, true}) {
    char rest[16];
    std::snprintf(rest, sizeof rest, "%zx", long_body.size() - 32);
    const auto wire = chunked ? "20\r\n" + long_body.substr(0, 32) + "\r\n" + rest + "\r\n" +
                                    long_body.substr(32) + "\r\n0\r\n\r\n"
                              : long_body;
    Relay r(wire, 16);
    TryReadOrigin origin{r.upstream};
    r.out_head = head;
    const auto reusable = test_support::run_to_end(
        r.io, relay_response(Hooks{&r.seen}, origin, r.in, r.client,
                             framing(plan(chunked, false), chunked ? 0 : long_body.size()), r.out_head,
                             std::span(r.relay), r.chunked));
    ASSERT_EQ(reusable, true) << chunked;
    EXPECT_EQ(r.received(), head + long_body) << chunked;
    EXPECT_GT(origin.tries, 0) << chunked;
    EXPECT_GE(origin.async_reads, 1) << chunked;
    // One read in max_pieces_read_now + 1 goes through the scheduler, each after its deadline.
    const int reads = origin.tries + origin.async_reads;
    EXPECT_LE(origin.async_reads, reads / static_cast<int>(max_pieces_read_now + 1) + 1) << chunked;
    EXPECT_EQ(r.seen.reads, origin.async_reads) << chunked;
  }
}

// A socket with nothing to read makes every read a wait through the scheduler, as before.
TEST(RelayResponse, ADrainedOriginIsWaitedFor) {
  const std::string long_body(5 * 16, 'y');
  Relay r(long_body, 16);
  TryReadOrigin origin{r.upstream, true};
  r.out_head = head;
  const auto reusable = test_support::run_to_end(
      r.io, relay_response(Hooks{&r.seen}, origin, r.in, r.client, framing(plan(false, false), long_body.size()),
                           r.out_head, std::span(r.relay), r.chunked));
  ASSERT_EQ(reusable, true);
  EXPECT_EQ(r.received(), head + long_body);
  EXPECT_EQ(origin.async_reads, 5);
  EXPECT_EQ(r.seen.reads, 5);
}

// A client with no room for the next piece: the relay waits for it before it reads that piece
// from the origin, asking room for no more than it will read, and goes on in the block the wait
// gave it. Bytes that came with the head need no room: they are read already.
TEST(RelayResponse, NothingMoreIsReadFromTheOriginUntilTheClientHasRoomForIt) {
  const std::string rest(40, 'z');
  Relay r(rest, 1 << 20);
  std::array<char, 16> other{};
  r.seen.other_block = std::span(other);
  r.seen.room_waits_left = 2;  // asked before the first read, and again before the third
  net::buffer_copy(r.in.prepare(body.size()), net::buffer(body));
  r.in.commit(body.size());
  const auto reusable = r.run(framing(plan(false, false), body.size() + rest.size()));
  ASSERT_EQ(reusable, true);
  EXPECT_EQ(r.received(), head + body + rest);
  EXPECT_EQ(r.seen.room_waits, 2);
  EXPECT_EQ(r.seen.room_asked, 8u);  // the last piece: what is left of the Content-Length
  EXPECT_EQ(r.seen.reads, 3);        // 16 + 16 + 8 bytes, each into the block the wait gave
}

// The wait's deadline passing is the client's failure: nothing more is read or written.
TEST(RelayResponse, AClientThatNeverHasRoomFailsAtItsDeadline) {
  Relay r(body, 1 << 20);
  std::array<char, 16> other{};
  r.seen.other_block = std::span(other);
  r.seen.room_waits_left = 1;
  r.seen.room_error = boost::beast::error::timeout;
  ASSERT_EQ(r.run(framing(plan(false, false), body.size())), false);
  EXPECT_TRUE(r.seen.client_failed);
  EXPECT_EQ(r.seen.reads, 0);
  EXPECT_EQ(r.received(), "");
  EXPECT_FALSE(r.seen.done);
}

// relay_at_once() and finish_at_once(): the common answer with no coroutine, on a client with
// try_write (tls::Stream's), whose non-blocking write here takes at most `room` bytes (what the
// socket has room for; 0: none, or a TLS stream); the rest goes through the test stream.
struct TryWriteClient {
  test::stream& stream;
  std::size_t room;
  int tries = 0;
  bool tls = false;  // writes_at_once() false, as tls::Stream's with TLS on it

  bool writes_at_once() const { return !tls; }

  using executor_type = test::stream::executor_type;
  executor_type get_executor() { return stream.get_executor(); }
  template <class Buffers>
  std::size_t try_write(const Buffers& buffers) {
    ++tries;
    if (tls) return 0;  // tls::Stream's takes no byte at once
    const auto n = std::min(room, net::buffer_size(buffers));
    if (n == 0) return 0;
    error_code ec;
    net::write(stream, boost::beast::buffers_prefix(n, buffers), ec);
    return ec ? 0 : n;  // a failed send takes nothing (tls::Stream's too)
  }
  template <class Buffers, class Token>
  auto async_write_some(const Buffers& buffers, Token&& token) {
    return stream.async_write_some(buffers, std::forward<Token>(token));
  }
};

struct AtOnceRelay : Relay {
  TryWriteClient at_once{client, 1 << 20};

  // `wire`: what the origin sent behind the head, all of it buffered.
  explicit AtOnceRelay(const std::string& wire, std::size_t room = 1 << 20) : Relay("") {
    at_once.room = room;
    in.commit(net::buffer_copy(in.prepare(wire.size()), net::buffer(wire)));
    out_head = head;
  }
  AtOnceResult try_now(const ResponseFraming& f) {
    Hooks hooks{&seen};
    return relay_at_once(hooks, in, at_once, f, out_head);
  }
  // What the session does after not_tried: the whole relay, from the head as it is now.
  std::optional<bool> relay_all(const ResponseFraming& f) {
    return test_support::run_to_end(
        io, relay_response(Hooks{&seen}, upstream, in, client, f, out_head, std::span(relay), chunked));
  }
  std::optional<bool> finish(const ResponseFraming& f, std::size_t written) {
    return test_support::run_to_end(io, finish_at_once(Hooks{&seen}, in, at_once, f, out_head, written));
  }
};

TEST(RelayAtOnce, AWholeSmallAnswerGoesInOneWriteWithTheHooksAsTheRelayCallsThem) {
  AtOnceRelay r(body);
  const auto result = r.try_now(framing(plan(false, false), body.size()));
  EXPECT_EQ(result.state, AtOnce::relayed);
  EXPECT_TRUE(result.reusable);
  EXPECT_EQ(r.received(), head + body);
  EXPECT_EQ(r.at_once.tries, 1);
  EXPECT_EQ(r.seen.writes, 1);
  EXPECT_TRUE(r.seen.head_reached);
  EXPECT_EQ(r.seen.body, body);
  EXPECT_TRUE(r.seen.done);
  EXPECT_EQ(r.in.size(), 0u);
}

TEST(RelayAtOnce, AnAnswerWithNoBodyGoesAsItsHead) {
  auto no_body = plan(false, false);
  no_body.body_expected = false;  // HEAD, 204, 304
  AtOnceRelay r("");
  EXPECT_EQ(r.try_now(framing(no_body)).state, AtOnce::relayed);
  EXPECT_EQ(r.received(), head);
  EXPECT_TRUE(r.seen.done);
  AtOnceRelay empty("");
  EXPECT_EQ(empty.try_now(framing(plan(false, false), 0)).state, AtOnce::relayed);
  EXPECT_EQ(empty.received(), head);
}

// What the origin sent past the body is not ours to relay: the connection is not reused.
TEST(RelayAtOnce, BytesPastTheBodyMakeTheConnectionNotReusable) {
  AtOnceRelay r(body + "HTTP/1.1 200 OK\r\n");
  const auto result = r.try_now(framing(plan(false, false), body.size()));
  EXPECT_EQ(result.state, AtOnce::relayed);
  EXPECT_FALSE(result.reusable);
  EXPECT_EQ(r.received(), head + body);
  AtOnceRelay origin_closes(body);
  EXPECT_FALSE(origin_closes.try_now(framing(plan(false, false), body.size(), false)).reusable);
}

// Anything else is left whole to relay_response(): nothing written, no hook called, the head as
// it was; and relay_response() then sends the answer once.
TEST(RelayAtOnce, EveryOtherAnswerIsLeftWholeToTheRelay) {
  const std::string big(coalesced_answer_max, 'b');
  struct Case {
    const char* what;
    std::string wire;
    ResponseFraming framing;
    std::size_t room;
  };
  const Case cases[] = {
      {"a body still to come", body.substr(0, 10), framing(plan(false, false), body.size()), 1 << 20},
      {"a body too large for one write with its head", big, framing(plan(false, false), big.size()), 1 << 20},
      {"a chunked body", chunked_wire(), framing(plan(true, false)), 1 << 20},
      {"a body re-chunked", body, framing(plan(false, true), body.size()), 1 << 20},
      {"a body read to the close", body, framing(plan(false, false, true)), 1 << 20},
      {"a client that takes no byte at once", body, framing(plan(false, false), body.size()), 0},
  };
  for (const auto& c : cases) {
    AtOnceRelay r(c.wire, c.room);
    EXPECT_EQ(r.try_now(c.framing).state, AtOnce::not_tried) << c.what;
    EXPECT_EQ(r.out_head, head) << c.what;
    EXPECT_EQ(r.received(), "") << c.what;
    EXPECT_EQ(r.seen.body, "") << c.what;
    EXPECT_FALSE(r.seen.head_reached || r.seen.done) << c.what;
    EXPECT_EQ(r.in.size(), c.wire.size()) << c.what;
  }
  // The last one through the relay, as the session goes on: the body once.
  AtOnceRelay r(body, 0);
  ASSERT_EQ(r.try_now(framing(plan(false, false), body.size())).state, AtOnce::not_tried);
  r.seen = Seen{};
  EXPECT_EQ(r.relay_all(framing(plan(false, false), body.size())), true);
  EXPECT_EQ(r.received(), head + body);
}

// A TLS client takes no byte at once: it is not tried, and the head is never touched (no body
// joined to it and cut off again); relay_response() then sends the answer once.
TEST(RelayAtOnce, ATlsClientIsNotTriedAndItsHeadIsLeftAsItWas) {
  AtOnceRelay r(body);
  r.at_once.tls = true;
  const auto capacity = r.out_head.capacity();
  EXPECT_EQ(r.try_now(framing(plan(false, false), body.size())).state, AtOnce::not_tried);
  EXPECT_EQ(r.at_once.tries, 0);
  EXPECT_EQ(r.out_head, head);
  EXPECT_EQ(r.out_head.capacity(), capacity);
  EXPECT_EQ(r.seen.writes, 0);
  EXPECT_EQ(r.in.size(), body.size());
  EXPECT_EQ(r.relay_all(framing(plan(false, false), body.size())), true);
  EXPECT_EQ(r.received(), head + body);
}

// A client that took part of it: finish_at_once() sends the rest, whatever the part.
TEST(RelayAtOnce, APartWrittenAtOnceIsFinishedByTheRest) {
  const auto answer = head + body;
  for (std::size_t room = 1; room < answer.size(); ++room) {
    AtOnceRelay r(body, room);
    const auto f = framing(plan(false, false), body.size());
    const auto result = r.try_now(f);
    ASSERT_EQ(result.state, AtOnce::partly) << room;
    EXPECT_EQ(result.written, room);
    EXPECT_TRUE(r.seen.head_reached);
    EXPECT_FALSE(r.seen.done);
    EXPECT_EQ(r.finish(f, result.written), true) << room;
    EXPECT_EQ(r.received(), answer) << room;
    EXPECT_EQ(r.seen.body, body);
    EXPECT_TRUE(r.seen.done);
    EXPECT_EQ(r.in.size(), 0u);
  }
}

// The rest's writes failing in turn: the client's failure, the connection not reused, the
// client given a prefix of the answer.
TEST(RelayAtOnce, FailEveryWriteOfTheRestInTurnUntilItSucceeds) {
  const auto answer = head + body;
  bool passed = false;
  for (std::size_t n = 0; n < 100 && !passed; ++n) {
    test::fail_count fc(n);
    Relay base(body, fc, true);
    TryWriteClient client{base.client, 7};
    base.in.commit(net::buffer_copy(base.in.prepare(body.size()), net::buffer(body)));
    base.out_head = head;
    const auto f = framing(plan(false, false), body.size());
    Hooks hooks{&base.seen};
    const auto result = relay_at_once(hooks, base.in, client, f, base.out_head);
    if (result.state == AtOnce::not_tried) continue;  // the first write failed: nothing sent
    ASSERT_EQ(result.state, AtOnce::partly) << n;
    const auto reusable = test_support::run_to_end(base.io, finish_at_once(Hooks{&base.seen}, base.in, client, f,
                                                                           base.out_head, result.written));
    ASSERT_TRUE(reusable) << n;
    if (base.seen.client_failed) {
      EXPECT_FALSE(*reusable);
      EXPECT_FALSE(base.seen.done);
      EXPECT_EQ(answer.substr(0, base.received().size()), base.received()) << n;
      continue;
    }
    EXPECT_TRUE(*reusable);
    EXPECT_EQ(base.received(), answer);
    passed = true;
  }
  EXPECT_TRUE(passed);
}

}  // namespace
}  // namespace sluice::proxy
