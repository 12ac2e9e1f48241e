// An upstream attempt's phases on beast::test::stream. The response head (read_final_head): a
// head in pieces of every size, 1xx heads passed on before the final one, every read failing in
// turn until the exchange passes, and what each way of ending returns. The request in one piece
// (send_whole): every write and read failing in turn, and what reached the origin each time. The
// try (attempt_server): a pooled connection the origin had closed, resent on a new one only when
// that cannot duplicate work; a failure's facts.
#include "sluice/proxy/upstream_attempt.hpp"

#include "run_to_end.hpp"

#include <gtest/gtest.h>

#include <array>
#include <deque>
#include <optional>
#include <string>
#include <vector>

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
  bool armed = false;           // send_whole() armed the head's deadline
  std::size_t* attempt_received = nullptr;  // attempt_server()'s count, when under it
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
  void received(std::size_t n) {
    seen->received += n;
    if (seen->attempt_received != nullptr) *seen->attempt_received += n;
  }
  void arm_response() { seen->armed = true; }
  bool client_gone() const { return seen->client_gone; }
  error_code timed(error_code ec) const {
    return ec && seen->reads_time_out ? error_code(boost::beast::error::timeout) : ec;
  }
};

FailureKind run(net::io_context& io, test::stream& upstream, boost::beast::flat_buffer& in, Seen& seen) {
  const auto out = test_support::run_to_end(io, read_final_head(Hooks{&seen}, upstream, in, max_header));
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


// ---- send_whole: the request in one piece, then its final head.

const std::string request_head = "POST /orders HTTP/1.1\r\nHost: shop\r\nContent-Length: 10\r\n\r\n";
const std::string request_body = "0123456789";

struct Sent {
  FailureKind outcome = FailureKind::tls_failed;  // none of these tests can end so
  std::uint64_t sent = 0;
};

Sent send(net::io_context& io, test::stream& upstream, boost::beast::flat_buffer& in, Seen& seen) {
  const std::array<net::const_buffer, 2> out{net::buffer(request_head), net::buffer(request_body)};
  std::uint64_t sent = 0;
  const auto outcome = test_support::run_to_end(io, send_whole(Hooks{&seen}, upstream, out, in, max_header, sent));
  EXPECT_TRUE(outcome) << "send_whole did not finish";
  return outcome ? Sent{*outcome, sent} : Sent{};
}

// Every write and read fails in turn until none does. What reached the origin is always exactly
// what `sent` counts; a failure before the first byte left is reset_before_send (the origin
// cannot have the request: any method may be resent), after it reset_after_send; the head's
// deadline is armed only once the whole request is out.
TEST(SendWhole, FailAtEveryPointUntilItSucceeds) {
  const std::string whole = request_head + request_body;
  bool passed = false;
  std::size_t before_send = 0, after_send = 0;
  for (std::size_t n = 1; n < 100 && !passed; ++n) {  // fail_count(n): the n-th operation fails
    net::io_context io;
    test::fail_count fc(n);
    test::stream upstream(io, fc, final_head);
    test::stream origin(io);
    upstream.connect(origin);
    upstream.write_size(16);
    upstream.read_size(7);
    boost::beast::flat_buffer in(max_header + head_read_chunk);
    Seen seen;
    const auto r = send(io, upstream, in, seen);
    EXPECT_EQ(origin.str(), whole.substr(0, r.sent)) << "point " << n;
    if (r.outcome == FailureKind::reset_before_send) {
      EXPECT_EQ(r.sent, 0u) << "point " << n;
      EXPECT_FALSE(seen.armed);
      ++before_send;
      continue;
    }
    if (r.outcome == FailureKind::reset_after_send) {
      EXPECT_GT(r.sent, 0u) << "point " << n;
      EXPECT_EQ(seen.armed, r.sent == whole.size()) << "point " << n;
      ++after_send;
      continue;
    }
    ASSERT_EQ(r.outcome, FailureKind::none) << "point " << n;
    EXPECT_EQ(r.sent, whole.size());
    EXPECT_TRUE(seen.armed);
    EXPECT_EQ(seen.head.status(), 200u);
    EXPECT_EQ(seen.received, final_head.size());
    passed = true;
  }
  EXPECT_TRUE(passed);
  EXPECT_EQ(before_send, 1u);  // only the first write's failure leaves nothing at the origin
  EXPECT_GT(after_send, 5u);   // the other writes (16 bytes each) and every read
}

TEST(SendWhole, AConnectionTheOriginClosedTakesNoByte) {
  net::io_context io;
  test::stream upstream(io);  // no peer: writes are refused (connection reset)
  boost::beast::flat_buffer in(max_header + head_read_chunk);
  Seen seen;
  const auto r = send(io, upstream, in, seen);
  EXPECT_EQ(r.outcome, FailureKind::reset_before_send);
  EXPECT_EQ(r.sent, 0u);
}

// ---- attempt_server: the try.

// What the test's origins do and what the hooks saw.
struct Origins {
  net::io_context* io = nullptr;
  std::deque<test::stream> peers;  // the origin end of each connection made
  std::string answer = final_head;  // what a new connection's origin answers
  bool refuse = false;              // new connections are refused
  bool resend_allowed = true;       // resend_on_new_connection()'s answer
  int connects = 0, readies = 0, forgets = 0, resends_asked = 0;
  Seen seen;
  boost::beast::flat_buffer in{max_header + head_read_chunk};
};

struct TryHooks {
  Origins* o;
  net::awaitable<Failure> connect(std::optional<test::stream>& upstream) {
    ++o->connects;
    if (o->refuse) co_return Failure::of(FailureKind::connect_refused);
    upstream.emplace(*o->io, o->answer);
    upstream->connect(o->peers.emplace_back(*o->io));
    co_return Failure{};
  }
  void ready(test::stream&) { ++o->readies; }
  net::awaitable<FailureKind> send(test::stream& upstream, std::uint64_t& sent, std::size_t& received) {
    o->seen.attempt_received = &received;
    const std::array<net::const_buffer, 2> out{net::buffer(request_head), net::buffer(request_body)};
    return send_whole(Hooks{&o->seen}, upstream, out, o->in, max_header, sent);
  }
  unsigned status() const { return o->seen.head.status(); }
  void forget() {
    ++o->forgets;
    o->in.clear();
  }
  bool resend_on_new_connection() {
    ++o->resends_asked;
    return o->resend_allowed;
  }
};

Failure attempt(net::io_context& io, Origins& o, std::optional<test::stream>& upstream) {
  o.io = &io;
  const auto result = test_support::run_to_end(io, attempt_server(TryHooks{&o}, upstream));
  EXPECT_TRUE(result) << "attempt_server did not finish";
  return result.value_or(Failure::of(FailureKind::tls_failed));
}

TEST(AttemptServer, ANewConnectionIsMadeAndAnswered) {
  net::io_context io;
  Origins o;
  std::optional<test::stream> upstream;
  const auto f = attempt(io, o, upstream);
  EXPECT_FALSE(f.failed());
  EXPECT_EQ(f.status, 200u);
  ASSERT_TRUE(upstream);  // the connection stays with the answer, for its body
  EXPECT_EQ(o.connects, 1);
  EXPECT_EQ(o.readies, 1);
  EXPECT_EQ(o.peers.front().str(), request_head + request_body);
}

TEST(AttemptServer, APooledConnectionIsUsedAsItIs) {
  net::io_context io;
  Origins o;
  test::stream origin(io);
  std::optional<test::stream> upstream;
  upstream.emplace(io, final_head);
  upstream->connect(origin);
  const auto f = attempt(io, o, upstream);
  EXPECT_FALSE(f.failed());
  EXPECT_EQ(o.connects, 0);
  EXPECT_EQ(origin.str(), request_head + request_body);
}

// The origin closed a pooled connection while it idled: before the request (a write refused) or
// after it (end of file before any response byte). Not the server's fault, and resent on a new
// connection when the hooks allow it; else the failure stands with its facts.
TEST(AttemptServer, AStalePooledConnectionIsReplacedOnlyWhenResendingIsSafe) {
  for (const bool after_send : {false, true}) {
    for (const bool allowed : {true, false}) {
      net::io_context io;
      Origins o;
      o.resend_allowed = allowed;
      test::stream origin(io);
      std::optional<test::stream> upstream;
      upstream.emplace(io);
      if (after_send) {
        upstream->connect(origin);
        upstream->close_remote();  // end of file on read
      }
      const auto f = attempt(io, o, upstream);
      const auto label = std::string(after_send ? "after" : "before") + (allowed ? ", allowed" : "");
      EXPECT_EQ(o.resends_asked, 1) << label;
      if (allowed) {
        EXPECT_FALSE(f.failed()) << label;
        EXPECT_EQ(o.connects, 1) << label;
        EXPECT_EQ(o.readies, 2) << label;
        EXPECT_EQ(o.forgets, 1) << label;
        ASSERT_TRUE(upstream) << label;
        EXPECT_EQ(o.peers.front().str(), request_head + request_body) << label;
        continue;
      }
      EXPECT_EQ(f.kind, after_send ? FailureKind::reset_after_send : FailureKind::reset_before_send) << label;
      EXPECT_TRUE(f.reused_connection) << label;
      EXPECT_EQ(f.request_bytes_sent, after_send) << label;
      EXPECT_FALSE(f.response_bytes_received) << label;
      EXPECT_TRUE(health::stale_connection(f)) << label;
      EXPECT_EQ(o.connects, 0) << label;
      EXPECT_FALSE(upstream) << label;
    }
  }
}

// A new connection that fails, or a pooled one that failed after response bytes came: the
// server's failure, never resent here (the retry decision is the Forwarder's).
TEST(AttemptServer, AFailureThatIsNotAStaleConnectionStands) {
  {
    net::io_context io;
    Origins o;
    o.answer = "HTTP/1.1 200 OK\r\n";  // then end of file
    std::optional<test::stream> upstream;
    o.io = &io;
    const auto f = [&] {
      // The new connection's origin closes after part of a head.
      struct CutHooks : TryHooks {
        net::awaitable<Failure> connect(std::optional<test::stream>& u) {
          const auto failure = co_await TryHooks::connect(u);
          u->close_remote();
          co_return failure;
        }
      };
      const auto result = test_support::run_to_end(io, attempt_server(CutHooks{{&o}}, upstream));
      EXPECT_TRUE(result) << "attempt_server did not finish";
      return result.value_or(Failure::of(FailureKind::tls_failed));
    }();
    EXPECT_EQ(f.kind, FailureKind::reset_after_send);
    EXPECT_FALSE(f.reused_connection);
    EXPECT_TRUE(f.request_bytes_sent);
    EXPECT_TRUE(f.response_bytes_received);
    EXPECT_EQ(o.resends_asked, 0);
    EXPECT_EQ(o.connects, 1);
  }
  {
    net::io_context io;
    Origins o;
    test::stream origin(io);
    std::optional<test::stream> upstream;
    upstream.emplace(io, "HTTP/1.1 200 OK\r\n");
    upstream->connect(origin);
    upstream->close_remote();
    const auto f = attempt(io, o, upstream);
    EXPECT_EQ(f.kind, FailureKind::reset_after_send);
    EXPECT_TRUE(f.reused_connection);
    EXPECT_TRUE(f.response_bytes_received);
    EXPECT_FALSE(health::stale_connection(f));
    EXPECT_EQ(o.resends_asked, 0);
    EXPECT_EQ(o.connects, 0);
  }
  {
    net::io_context io;
    Origins o;
    o.refuse = true;
    std::optional<test::stream> upstream;
    const auto f = attempt(io, o, upstream);
    EXPECT_EQ(f.kind, FailureKind::connect_refused);
    EXPECT_EQ(o.readies, 0);
    EXPECT_FALSE(upstream);
  }
}

}  // namespace
}  // namespace sluice::proxy
