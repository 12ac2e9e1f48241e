// The response-head phase of an upstream attempt (read_final_head) on beast::test::stream: a
// head in pieces of every size, 1xx heads passed on before the final one, every read failing in
// turn until the exchange passes, and what each way of ending returns.
#include "sluice/proxy/upstream_attempt.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>

namespace sluice::proxy {
namespace {

namespace net = boost::asio;
namespace test = boost::beast::test;
using boost::system::error_code;

constexpr std::size_t max_header = 8 * 1024;

// What the hooks saw, kept outside them (read_final_head takes its hooks by value).
struct Seen {
  http::ResponseHead head;
  std::vector<unsigned> interims;
  std::size_t received = 0;
  bool client_gone = false;
  bool interim_ok = true;      // the client took the interim head
  bool reads_time_out = false;  // every error is the deadline's (timed() says timeout)
};

struct Hooks {
  Seen* seen;
  http::ResponseHead& index() { return seen->head; }
  // As the session's final_head(): 1xx but 101 are interim.
  std::optional<FailureKind> complete(const http::ResponseHead& head) {
    const auto code = head.status();
    if (code >= 100 && code < 200 && code != 101) return std::nullopt;
    return FailureKind::none;
  }
  net::awaitable<bool> interim(const http::ResponseHead& head) {
    seen->interims.push_back(head.status());
    co_return seen->interim_ok;
  }
  void received(std::size_t n) { seen->received += n; }
  bool client_gone() const { return seen->client_gone; }
  error_code timed(error_code ec) const {
    return ec && seen->reads_time_out ? error_code(boost::beast::error::timeout) : ec;
  }
};

FailureKind run(net::io_context& io, test::stream& upstream, boost::beast::flat_buffer& in, Seen& seen) {
  std::optional<FailureKind> out;
  net::co_spawn(io, read_final_head(Hooks{&seen}, upstream, in, max_header),
                [&](std::exception_ptr e, FailureKind k) {
                  if (e) std::rethrow_exception(e);
                  out = k;
                });
  io.run();
  io.restart();
  EXPECT_TRUE(out) << "read_final_head did not finish";
  return out.value_or(FailureKind::tls_failed);  // none of these tests can end so
}

std::string rest(const boost::beast::flat_buffer& in) {
  return {static_cast<const char*>(in.data().data()), in.size()};
}

const std::string early = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n";
const std::string final_head = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Origin: a\r\n\r\n";
const std::string body = "hello";

TEST(ReadFinalHead, AHeadInPiecesOfEverySizeIsIndexedWholeAfterItsInterimHead) {
  const std::string wire = early + final_head + body;
  for (std::size_t piece = 1; piece <= wire.size(); ++piece) {
    net::io_context io;
    test::stream upstream(io, wire);
    upstream.read_size(piece);
    boost::beast::flat_buffer in(max_header + head_read_chunk);
    Seen seen;
    ASSERT_EQ(run(io, upstream, in, seen), FailureKind::none) << "pieces of " << piece;
    EXPECT_EQ(seen.interims, std::vector<unsigned>{103}) << "pieces of " << piece;
    EXPECT_EQ(seen.head.status(), 200u);
    EXPECT_EQ(seen.head.content_length().value_or(0), 5u);
    EXPECT_EQ(seen.head.value(http::KnownField::content_length), "5");
    // What came after the head stays buffered for the body relay, and nothing more was read
    // than the head needed plus the rest of its last piece.
    const auto head_end = early.size() + final_head.size();
    EXPECT_EQ(rest(in), wire.substr(head_end, seen.received - head_end)) << "pieces of " << piece;
    EXPECT_LT(seen.received, head_end + piece);
  }
}

// Every read fails in turn (Beast's fail_count) until none does: each failing run ends as a
// reset after the request was sent (the origin may have it: not retried unless idempotent),
// never as a bad response or as a head taken from a part of the bytes.
TEST(ReadFinalHead, FailAtEveryPointUntilItSucceeds) {
  const std::string wire = early + final_head;
  bool passed = false;
  for (std::size_t n = 0; n < 100 && !passed; ++n) {
    net::io_context io;
    test::fail_count fc(n);
    test::stream upstream(io, fc, wire);
    upstream.read_size(7);
    boost::beast::flat_buffer in(max_header + head_read_chunk);
    Seen seen;
    const auto outcome = run(io, upstream, in, seen);
    if (outcome == FailureKind::reset_after_send) {
      EXPECT_LT(seen.received, wire.size()) << "point " << n;
      EXPECT_LE(seen.interims.size(), 1u);
      continue;
    }
    ASSERT_EQ(outcome, FailureKind::none) << "point " << n;
    EXPECT_EQ(seen.interims, std::vector<unsigned>{103});
    EXPECT_EQ(seen.head.status(), 200u);
    EXPECT_EQ(seen.received, wire.size());
    EXPECT_GT(n, 0u);
    passed = true;
  }
  EXPECT_TRUE(passed);
}

TEST(ReadFinalHead, EndOfStreamBeforeTheHeadIsAResetAfterSend) {
  net::io_context io;
  test::stream upstream(io, "HTTP/1.1 200 OK\r\nContent-Le");
  test::stream peer(io);
  upstream.connect(peer);
  peer.close();  // after the buffered bytes, end of file
  boost::beast::flat_buffer in(max_header + head_read_chunk);
  Seen seen;
  EXPECT_EQ(run(io, upstream, in, seen), FailureKind::reset_after_send);
}

TEST(ReadFinalHead, AnErrorTheDeadlineCausedIsAResponseTimeout) {
  net::io_context io;
  test::fail_count fc(1);
  test::stream upstream(io, fc, "HTTP/1.1 200 OK\r\n");
  upstream.read_size(4);
  boost::beast::flat_buffer in(max_header + head_read_chunk);
  Seen seen;
  seen.reads_time_out = true;
  EXPECT_EQ(run(io, upstream, in, seen), FailureKind::response_timeout);
}

TEST(ReadFinalHead, AMalformedHeadIsABadResponse) {
  for (const std::string wire : {"HTTP/1.1 2x0 OK\r\n\r\n", "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
                                 "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"}) {
    net::io_context io;
    test::stream upstream(io, wire);
    boost::beast::flat_buffer in(max_header + head_read_chunk);
    Seen seen;
    EXPECT_EQ(run(io, upstream, in, seen), FailureKind::bad_response) << wire;
  }
}

TEST(ReadFinalHead, AHeadOverTheLimitIsABadResponse) {
  net::io_context io;
  test::stream upstream(io, "HTTP/1.1 200 OK\r\nX-Big: " + std::string(max_header, 'a') + "\r\n\r\n");
  upstream.read_size(1024);
  boost::beast::flat_buffer in(max_header + head_read_chunk);
  Seen seen;
  EXPECT_EQ(run(io, upstream, in, seen), FailureKind::bad_response);
  EXPECT_LE(seen.received, max_header + head_read_chunk);
}

// An upload's client side failed, or the client did not take an interim head: the attempt ends
// as the client's failure, not the server's.
TEST(ReadFinalHead, TheClientGoneEndsTheAttemptAsTheClientsFailure) {
  {
    net::io_context io;
    test::stream upstream(io, final_head);
    upstream.read_size(4);
    boost::beast::flat_buffer in(max_header + head_read_chunk);
    Seen seen;
    seen.client_gone = true;
    EXPECT_EQ(run(io, upstream, in, seen), FailureKind::client_failed);
    EXPECT_EQ(seen.received, 4u);
  }
  {
    net::io_context io;
    test::stream upstream(io, early + final_head);
    boost::beast::flat_buffer in(max_header + head_read_chunk);
    Seen seen;
    seen.interim_ok = false;
    EXPECT_EQ(run(io, upstream, in, seen), FailureKind::client_failed);
    EXPECT_EQ(seen.interims, std::vector<unsigned>{103});
  }
}

}  // namespace
}  // namespace sluice::proxy
