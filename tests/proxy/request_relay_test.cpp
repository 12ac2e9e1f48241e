// The streamed request relay (stream_request_body, request_relay.hpp) on beast::test::stream: the
// head and the body's pieces reach the origin as they came or re-chunked, the head with the first
// piece and the last-chunk with the last; pieces that are only chunk framing write nothing; the
// client side's end and the response side's stop end the upload between pieces; every write
// failing in turn until the relay passes, the origin holding a prefix of the request each time.
#include "sluice/proxy/request_relay.hpp"

#include "run_to_end.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/_experimental/test/stream.hpp>

namespace sluice::proxy {
namespace {

namespace net = boost::asio;
namespace test = boost::beast::test;
using boost::system::error_code;

// What the hooks were given and saw, kept outside them (the relay takes its hooks by value).
struct Script {
  std::deque<UploadPiece> pieces;  // what next() returns, in turn
  int stop_after_writes = -1;      // the response side stops the upload after this many writes
  int writes = 0;
  std::vector<std::string> sent;   // the pieces sent() was told of
  bool all_sent = false;
  bool write_failed = false;
};

struct Hooks {
  Script* s;
  net::awaitable<UploadPiece> next() {
    auto p = s->pieces.front();
    s->pieces.pop_front();
    co_return p;
  }
  // As the upstream exchange's write(): the whole framed piece, or the error.
  net::awaitable<error_code> write(test::stream& upstream, std::span<const net::const_buffer> out) {
    auto [ec, n] = co_await net::async_write(upstream, out, net::as_tuple(net::use_awaitable));
    ++s->writes;
    co_return ec;
  }
  bool stopped() const { return s->stop_after_writes >= 0 && s->writes >= s->stop_after_writes; }
  FailureKind write_failed() {
    s->write_failed = true;
    return FailureKind::reset_after_send;
  }
  void sent(std::string_view piece) { s->sent.emplace_back(piece); }
  void all_sent() { s->all_sent = true; }
};

UploadPiece piece(std::string_view bytes, bool last = false) { return UploadPiece{bytes, last, {}}; }

const std::string head = "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";

struct Relay {
  net::io_context io;
  test::stream upstream{io};
  test::stream origin{io};  // what reached the origin
  Script script;

  Relay() { upstream.connect(origin); }
  explicit Relay(test::fail_count& fc) : upstream(io, fc) {
    upstream.connect(origin);
    upstream.write_size(7);
  }
  std::optional<FailureKind> run(bool chunked, bool body_done = false) {
    return test_support::run_to_end(io, stream_request_body(Hooks{&script}, upstream, head, chunked, body_done));
  }
};

TEST(StreamRequestBody, ContentLengthPiecesFollowTheHeadAsTheyCame) {
  Relay r;
  r.script.pieces = {piece("hel"), piece("lo "), piece("world", true)};
  EXPECT_EQ(r.run(false), FailureKind::none);
  EXPECT_EQ(r.origin.str(), head + "hello world");
  EXPECT_EQ(r.script.writes, 3);  // the head went with the first piece
  EXPECT_EQ(r.script.sent, (std::vector<std::string>{"hel", "lo ", "world"}));
  EXPECT_TRUE(r.script.all_sent);
}

TEST(StreamRequestBody, AChunkedBodyIsReChunkedAndEndsWithTheLastChunk) {
  Relay r;
  // An empty piece that is not the last is only framing: nothing is written for it.
  r.script.pieces = {piece("wiki"), piece(""), piece("pedia"), piece("", true)};
  EXPECT_EQ(r.run(true), FailureKind::none);
  EXPECT_EQ(r.origin.str(), head + "4\r\nwiki\r\n5\r\npedia\r\n0\r\n\r\n");
  EXPECT_EQ(r.script.writes, 3);
  EXPECT_TRUE(r.script.all_sent);
}

// A chunked body the client side had read whole already: the head and the last-chunk alone.
TEST(StreamRequestBody, ABodyAlreadyDoneSendsTheHeadAndItsEnd) {
  Relay r;
  EXPECT_EQ(r.run(true, true), FailureKind::none);
  EXPECT_EQ(r.origin.str(), head + "0\r\n\r\n");
  EXPECT_TRUE(r.script.pieces.empty());
}

// The client side ends the upload (it failed, or answered 408/413 itself): its verdict stands and
// nothing more is written.
TEST(StreamRequestBody, TheClientSidesEndStopsTheUploadWithItsVerdict) {
  Relay r;
  r.script.pieces = {piece("wiki"), UploadPiece::ends(FailureKind::client_failed)};
  EXPECT_EQ(r.run(true), FailureKind::client_failed);
  EXPECT_EQ(r.origin.str(), head + "4\r\nwiki\r\n");
  EXPECT_FALSE(r.script.all_sent);
}

// The origin answered first (the response side stopped the upload): no further piece is asked
// for or written, and the upload ends without a failure of its own.
TEST(StreamRequestBody, TheResponseSidesStopEndsTheUploadBetweenPieces) {
  Relay r;
  r.script.stop_after_writes = 1;
  r.script.pieces = {piece("wiki"), piece("pedia", true)};
  EXPECT_EQ(r.run(true), FailureKind::none);
  EXPECT_EQ(r.origin.str(), head + "4\r\nwiki\r\n");
  EXPECT_EQ(r.script.pieces.size(), 1u);
  EXPECT_FALSE(r.script.all_sent);
}

// Every write fails in turn until none does: a failing run ends as the hooks' write verdict and
// the origin holds a prefix of the whole request, never more, never out of order.
TEST(StreamRequestBody, FailEveryWriteInTurnUntilItSucceeds) {
  const std::string whole = head + "4\r\nwiki\r\n5\r\npedia\r\n0\r\n\r\n";
  bool passed = false;
  for (std::size_t n = 0; n < 100 && !passed; ++n) {
    test::fail_count fc(n);
    Relay r(fc);
    r.script.pieces = {piece("wiki"), piece("pedia"), piece("", true)};
    const auto outcome = r.run(true);
    ASSERT_TRUE(outcome) << "point " << n;
    const auto got = r.origin.str();
    EXPECT_EQ(whole.substr(0, got.size()), got) << "point " << n;
    if (r.script.write_failed) {
      EXPECT_EQ(*outcome, FailureKind::reset_after_send) << "point " << n;
      EXPECT_FALSE(r.script.all_sent);
      continue;
    }
    EXPECT_EQ(*outcome, FailureKind::none);
    EXPECT_EQ(got, whole);
    EXPECT_TRUE(r.script.all_sent);
    EXPECT_GT(n, 0u);
    passed = true;
  }
  EXPECT_TRUE(passed);
}

}  // namespace
}  // namespace sluice::proxy
