#include "sluice/proxy/body_relay.hpp"

#include <gtest/gtest.h>

#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>

namespace sluice::proxy {
namespace {

namespace net = boost::asio;
namespace test = boost::beast::test;

template <class T>
T run(net::io_context& io, net::awaitable<T> op) {
  T out{};
  net::co_spawn(io, std::move(op), [&](std::exception_ptr e, T v) {
    if (e) std::rethrow_exception(e);
    out = std::move(v);
  });
  io.run();
  io.restart();
  return out;
}

std::string wire(const FramedPiece& p) { return boost::beast::buffers_to_string(p.buffers()); }

TEST(FramedPiece, HeadPieceAndChunkFraming) {
  EXPECT_EQ(wire(FramedPiece("HEAD\r\n\r\n", "abc", false, false)), "HEAD\r\n\r\nabc");
  EXPECT_EQ(wire(FramedPiece("", "abc", false, true)), "abc");
  EXPECT_EQ(wire(FramedPiece("H", "hello world", true, false)), "Hb\r\nhello world\r\n");
  EXPECT_EQ(wire(FramedPiece("", "abc", true, true)), "3\r\nabc\r\n0\r\n\r\n");
  // An empty last piece of a chunked body is its last-chunk alone; of another body, nothing.
  EXPECT_EQ(wire(FramedPiece("", "", true, true)), "0\r\n\r\n");
  EXPECT_EQ(FramedPiece("", "", false, true).buffers().size(), 0u);
}

// Bytes buffered behind the head go first, bounded by what is left of the body; the stream is
// not read then.
TEST(ReadPiece, BufferedBytesFirstBoundedByTheLength) {
  net::io_context io;
  test::stream from(io, "never read");
  boost::beast::flat_buffer pending;
  const std::string_view behind = "abcdefNEXT";
  pending.commit(net::buffer_copy(pending.prepare(behind.size()), net::buffer(behind)));
  char relay[64];
  int armed = 0;
  const auto p = run(io, read_piece(from, pending, std::span(relay), 6, false, [&] { ++armed; }));
  EXPECT_TRUE(p.buffered);
  EXPECT_EQ(p.bytes, "abcdef");
  EXPECT_EQ(armed, 0);
  const auto all = run(io, read_piece(from, pending, std::span(relay), 0, true, [&] { ++armed; }));
  EXPECT_EQ(all.bytes, behind);  // read-to-close: everything buffered is body
}

TEST(PendingPiece, WhatIsBufferedBoundedByTheLengthUnlessReadToClose) {
  boost::beast::flat_buffer pending;
  EXPECT_TRUE(pending_piece(pending, 10, false).empty());
  const std::string_view behind = "bodyNEXT";
  pending.commit(net::buffer_copy(pending.prepare(behind.size()), net::buffer(behind)));
  EXPECT_EQ(pending_piece(pending, 4, false), "body");
  EXPECT_EQ(pending_piece(pending, 100, false), behind);
  EXPECT_EQ(pending_piece(pending, 0, true), behind);
  EXPECT_EQ(pending.size(), behind.size());  // not consumed
}

TEST(ReadPiece, ReadsAtMostTheRelayAndWhatIsLeft) {
  net::io_context io;
  test::stream from(io, "0123456789");
  boost::beast::flat_buffer pending;
  char relay[4];
  int armed = 0;
  auto p = run(io, read_piece(from, pending, std::span(relay), 100, false, [&] { ++armed; }));
  EXPECT_FALSE(p.buffered);
  EXPECT_FALSE(p.ec);
  EXPECT_EQ(p.bytes, "0123");
  EXPECT_EQ(armed, 1);  // the deadline is set before each read
  p = run(io, read_piece(from, pending, std::span(relay), 2, false, [] {}));
  EXPECT_EQ(p.bytes, "45");
}

// The peer's EOF ends a read-to-close body: read_piece reports it, the caller decides.
TEST(ReadPiece, EndOfStreamIsReported) {
  net::io_context io;
  test::stream from(io);
  from.close();
  boost::beast::flat_buffer pending;
  char relay[16];
  const auto p = run(io, read_piece(from, pending, std::span(relay), 0, true, [] {}));
  EXPECT_EQ(p.ec, net::error::eof);
  EXPECT_TRUE(p.bytes.empty());
}

// A relay of a Content-Length body through read_piece and FramedPiece, re-chunked, with the read
// or the write failing at every point in turn until the whole body passes: each failure is
// reported where it happened, and a run that passes delivers exactly the chunked body.
TEST(BodyRelay, FailAtEveryPointUntilItSucceeds) {
  const std::string body = "the quick brown fox jumps over the lazy dog";
  for (std::size_t n = 0; n < 100; ++n) {
    net::io_context io;
    test::fail_count fc(n);
    test::stream from(io, fc, body);
    test::stream to(io, fc);
    test::stream peer(io);
    to.connect(peer);
    boost::beast::flat_buffer pending;
    char relay[8];
    boost::system::error_code failure;
    const auto step = [&]() -> net::awaitable<bool> {
      std::uint64_t left = body.size();
      bool head = true;
      while (left > 0) {
        const auto p = co_await read_piece(from, pending, std::span(relay), left, false, [] {});
        if (p.ec) {
          failure = p.ec;
          co_return false;
        }
        left -= p.bytes.size();
        const FramedPiece out(head ? "HEAD\r\n\r\n" : "", p.bytes, true, left == 0);
        auto [ec, written] = co_await net::async_write(to, out.buffers(), net::as_tuple(net::use_awaitable));
        if (ec) {
          failure = ec;
          co_return false;
        }
        head = false;
      }
      co_return true;
    };
    if (!run(io, step())) {
      // The injected failure itself, not an eof or a short piece taken for one.
      EXPECT_EQ(failure, test::error::test_failure) << "point " << n << ": " << failure.message();
      continue;  // failed at point n: try with the failure one step later
    }
    std::string expected = "HEAD\r\n\r\n";
    for (std::size_t i = 0; i < body.size(); i += sizeof relay) {
      const auto piece = body.substr(i, sizeof relay);
      expected += std::to_string(piece.size()) + "\r\n" + piece + "\r\n";
    }
    expected += "0\r\n\r\n";
    EXPECT_EQ(peer.str(), expected);
    EXPECT_GT(n, 0u);
    return;
  }
  FAIL() << "never succeeded";
}

}  // namespace
}  // namespace sluice::proxy
