// The request-head phase of the client side (read_request_head) on beast::test::stream: a head in
// pieces of every size, every read failing in turn until the head is read, the header timeout
// with part of a head (408) and without (closed, nothing to answer), end of stream, the session's
// look deciding on what is buffered, and a graceful shutdown closing an idle connection unread.
#include "sluice/proxy/request_head.hpp"

#include "run_to_end.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "sluice/core/arena.hpp"

namespace sluice::proxy {
namespace {

namespace net = boost::asio;
namespace test = boost::beast::test;
using boost::system::error_code;

constexpr std::size_t max_header = 8 * 1024;

// What the hooks saw and decide, kept outside them (read_request_head takes its hooks by value).
struct Seen {
  boost::beast::flat_buffer* in = nullptr;
  bool idle = true;
  bool stopping = false;
  bool reads_time_out = false;  // every error is the deadline's (timed() says timeout)
  int looks = 0, busy = 0;
  std::string head;  // what look() took as the complete head
  ProxyError error;  // the answer to a refused head
};

// A look as the session's: a head is complete at its empty line (taken off the buffer); a
// "BAD" line is a violation (400).
struct Hooks {
  Seen* seen;
  std::optional<HeadResult> look() {
    ++seen->looks;
    const std::string_view bytes(static_cast<const char*>(seen->in->data().data()), seen->in->size());
    if (bytes.starts_with("BAD")) {
      seen->error = {400, "bad request line"};
      return HeadResult::error;
    }
    const auto end = bytes.find("\r\n\r\n");
    if (end == std::string_view::npos) return std::nullopt;
    seen->head = bytes.substr(0, end + 4);
    seen->in->consume(end + 4);
    return HeadResult::ok;
  }
  bool idle() const { return seen->idle; }
  bool stopping() const { return seen->stopping; }
  void waiting(bool) {}
  bool woke(error_code) { return false; }
  void busy() {
    ++seen->busy;
    seen->idle = false;
  }
  error_code timed(error_code ec) const {
    return ec && seen->reads_time_out ? error_code(boost::beast::error::timeout) : ec;
  }
  void refuse(const ProxyError& e) { seen->error = e; }
};

HeadResult run(net::io_context& io, test::stream& client, boost::beast::flat_buffer& in, Seen& seen) {
  seen.in = &in;
  const auto out = test_support::run_to_end(io, read_request_head(Hooks{&seen}, client, in));
  EXPECT_TRUE(out) << "read_request_head did not finish";
  return out.value_or(HeadResult::parked);  // none of these tests can end so
}

const std::string head = "GET /a HTTP/1.1\r\nHost: shop\r\nAccept: */*\r\n\r\n";
const std::string next = "GET /b HTTP/1.1\r\n";

// A head buffer over the worker's tiers: 1 KiB first (a connection that sends half a head pins
// no more), 4 KiB for a longer head, then the arena-sized block; each step taken only when the
// buffer is full.
TEST(PrepareHeadRead, AHeadBufferGrowsThroughTheBlockTiers) {
  BlockPool arena(arena_block_size, 4);
  BlockPool grown(head_grown_size, 4, &arena);
  BlockPool small(head_block_size, 4, &grown);
  boost::beast::basic_flat_buffer<PoolAllocator<char>> in(16 * 1024 + head_read_chunk,
                                                          PoolAllocator<char>(&small));
  auto fill = [&] {
    const auto room = prepare_head_read(in);
    std::memset(room.data(), 'a', room.size());
    in.commit(room.size());
  };
  EXPECT_EQ(prepare_head_read(in).size(), head_block_size);
  EXPECT_EQ(in.capacity(), head_block_size);
  in.commit(100);
  EXPECT_EQ(prepare_head_read(in).size(), head_block_size - 100);  // the rest of the block
  fill();
  EXPECT_EQ(prepare_head_read(in).size(), head_grown_size - head_block_size);
  EXPECT_EQ(in.capacity(), head_grown_size);
  fill();
  EXPECT_EQ(in.size(), head_grown_size);
  EXPECT_EQ(prepare_head_read(in).size(), head_read_chunk);
  EXPECT_EQ(in.capacity(), head_grown_size + head_read_chunk);  // within an arena block
  EXPECT_EQ(small.free_blocks(), 1u);  // the outgrown blocks went back to their tiers
  EXPECT_EQ(grown.free_blocks(), 1u);
}

TEST(ReadRequestHead, AHeadInPiecesOfEverySizeIsTakenWholeAndWhatFollowsStaysBuffered) {
  const std::string wire = head + next;
  for (std::size_t piece = 1; piece <= wire.size(); ++piece) {
    net::io_context io;
    test::stream client(io, wire);
    client.read_size(piece);
    boost::beast::flat_buffer in(max_header);
    Seen seen;
    ASSERT_EQ(run(io, client, in, seen), HeadResult::ok) << "pieces of " << piece;
    EXPECT_EQ(seen.head, head) << "pieces of " << piece;
    // Read as it came: what is left is the next request's start, no more than one piece past the head.
    const std::string_view rest(static_cast<const char*>(in.data().data()), in.size());
    EXPECT_EQ(rest, std::string_view(next).substr(0, rest.size())) << "pieces of " << piece;
    EXPECT_LT(rest.size(), piece);
    EXPECT_EQ(seen.busy, static_cast<int>((head.size() + piece - 1) / piece)) << "pieces of " << piece;
  }
}

// Every read fails in turn (Beast's fail_count) until none does: each failing run ends the
// connection with nothing to answer (an error that is not the deadline's), never with a head
// taken from part of the bytes; the first passing run takes the head whole.
TEST(ReadRequestHead, FailAtEveryPointUntilItSucceeds) {
  bool passed = false;
  for (std::size_t n = 1; n < 100 && !passed; ++n) {
    net::io_context io;
    test::fail_count fc(n);
    test::stream client(io, fc, head);
    client.read_size(5);
    boost::beast::flat_buffer in(max_header);
    Seen seen;
    const auto r = run(io, client, in, seen);
    if (r == HeadResult::closed) {
      EXPECT_TRUE(seen.head.empty()) << "point " << n;
      EXPECT_EQ(seen.busy, static_cast<int>(n) - 1) << "point " << n;  // every read before it brought bytes
      continue;
    }
    ASSERT_EQ(r, HeadResult::ok) << "point " << n;
    EXPECT_EQ(seen.head, head);
    EXPECT_GT(n, head.size() / 5);
    passed = true;
  }
  EXPECT_TRUE(passed);
}

TEST(ReadRequestHead, TheHeaderTimeoutWithPartOfAHeadIs408AndWithoutItClosesQuietly) {
  {
    net::io_context io;
    test::fail_count fc(2);  // the second read: the deadline's cancellation
    test::stream client(io, fc, head);
    client.read_size(7);
    boost::beast::flat_buffer in(max_header);
    Seen seen;
    seen.reads_time_out = true;
    EXPECT_EQ(run(io, client, in, seen), HeadResult::error);
    EXPECT_EQ(seen.error.status, 408u);
    EXPECT_EQ(seen.error.reason, "header timeout");
  }
  {
    net::io_context io;
    test::fail_count fc(1);  // idle: the idle timeout before any byte
    test::stream client(io, fc, head);
    boost::beast::flat_buffer in(max_header);
    Seen seen;
    seen.reads_time_out = true;
    EXPECT_EQ(run(io, client, in, seen), HeadResult::closed);
    EXPECT_EQ(seen.busy, 0);
    EXPECT_EQ(seen.error.status, 0u);
  }
}

TEST(ReadRequestHead, EndOfStreamClosesAndTheLooksVerdictIsReturned) {
  {
    net::io_context io;
    test::stream client(io, "GET /a HTTP/1.1\r\nHo");
    test::stream peer(io);
    client.connect(peer);
    peer.close();  // after the buffered bytes, end of file
    boost::beast::flat_buffer in(max_header);
    Seen seen;
    EXPECT_EQ(run(io, client, in, seen), HeadResult::closed);
    EXPECT_TRUE(seen.head.empty());
  }
  {
    net::io_context io;
    test::stream client(io, "BAD\r\n\r\n");
    boost::beast::flat_buffer in(max_header);
    Seen seen;
    EXPECT_EQ(run(io, client, in, seen), HeadResult::error);
    EXPECT_EQ(seen.error.status, 400u);
  }
}

// Bytes already buffered (a pipelined request) are looked at before any read; a graceful
// shutdown closes an idle connection without reading, a busy one is read on.
TEST(ReadRequestHead, BufferedBytesComeFirstAndShutdownClosesOnlyAnIdleConnection) {
  {
    net::io_context io;
    test::fail_count fc(1);  // any read would fail
    test::stream client(io, fc);
    boost::beast::flat_buffer in(max_header);
    net::buffer_copy(in.prepare(head.size()), net::buffer(head));
    in.commit(head.size());
    Seen seen;
    seen.idle = false;
    EXPECT_EQ(run(io, client, in, seen), HeadResult::ok);
    EXPECT_EQ(seen.head, head);
    EXPECT_EQ(seen.looks, 1);
  }
  {
    net::io_context io;
    test::stream client(io, head);
    boost::beast::flat_buffer in(max_header);
    Seen seen;
    seen.stopping = true;
    EXPECT_EQ(run(io, client, in, seen), HeadResult::closed);
    EXPECT_EQ(seen.looks, 0);
    EXPECT_EQ(client.nread(), 0u);
  }
  {
    net::io_context io;
    test::stream client(io, head);
    boost::beast::flat_buffer in(max_header);
    Seen seen;
    seen.stopping = true;
    seen.idle = false;  // its request is on its way: served
    EXPECT_EQ(run(io, client, in, seen), HeadResult::ok);
  }
}

// Hooks that serve requests (the session's kind): every head taken is an exchange, and the phase
// goes on to the next head in the same frame until the connection is done.
struct Served {
  std::vector<std::string> heads;  // what each exchange was given, in order
  int exchanges_kept = 1 << 20;    // exchanges answering keep-alive before one that does not
  bool go_on = true;               // exchanged()'s answer when the exchange kept the connection
  int exchanged = 0;
};

struct ServingHooks : Hooks {
  Served* served;
  net::awaitable<bool> exchange() {
    served->heads.push_back(seen->head);
    co_return served->exchanges_kept-- > 0;
  }
  bool exchanged(bool keep) {
    ++served->exchanged;
    return keep && served->go_on;
  }
};
static_assert(ServesRequests<ServingHooks> && !ServesRequests<Hooks>);

HeadResult serve(net::io_context& io, test::stream& client, boost::beast::flat_buffer& in, Seen& seen,
                 Served& served) {
  seen.in = &in;
  const auto out = test_support::run_to_end(io, read_request_head(ServingHooks{{&seen}, &served}, client, in));
  EXPECT_TRUE(out) << "read_request_head did not finish";
  return out.value_or(HeadResult::ok);  // never returned when serving
}

const std::string second = "GET /b HTTP/1.1\r\nHost: shop\r\n\r\n";

TEST(ServeRequests, PipelinedHeadsInPiecesOfEverySizeAreServedInTurnUntilTheStreamEnds) {
  const std::string wire = head + second + head;
  for (std::size_t piece = 1; piece <= wire.size(); ++piece) {
    net::io_context io;
    test::stream client(io, wire);
    test::stream peer(io);
    client.connect(peer);
    peer.close();  // after the buffered bytes, end of file
    client.read_size(piece);
    boost::beast::flat_buffer in(max_header);
    Seen seen;
    Served served;
    EXPECT_EQ(serve(io, client, in, seen, served), HeadResult::closed) << "pieces of " << piece;
    EXPECT_EQ(served.heads, (std::vector<std::string>{head, second, head})) << "pieces of " << piece;
    EXPECT_EQ(served.exchanged, 3);
    EXPECT_EQ(in.size(), 0u);
  }
}

TEST(ServeRequests, AnExchangeThatEndsTheConnectionEndsTheLoopWithWhatFollowsUnread) {
  net::io_context io;
  test::stream client(io, head + second + head);
  boost::beast::flat_buffer in(max_header);
  Seen seen;
  Served served;
  served.exchanges_kept = 1;  // the second exchange says close
  EXPECT_EQ(serve(io, client, in, seen, served), HeadResult::closed);
  EXPECT_EQ(served.heads, (std::vector<std::string>{head, second}));
  const std::string_view rest(static_cast<const char*>(in.data().data()), in.size());
  EXPECT_EQ(rest, head);  // read with the others, not served

  net::io_context io2;
  test::stream client2(io2, head + second);
  boost::beast::flat_buffer in2(max_header);
  Seen seen2;
  Served stopped;
  stopped.go_on = false;  // the session's own reason (shutdown, closed) after a kept exchange
  EXPECT_EQ(serve(io2, client2, in2, seen2, stopped), HeadResult::closed);
  EXPECT_EQ(stopped.heads, (std::vector<std::string>{head}));
}

TEST(ServeRequests, ARefusedHeadAfterServedOnesEndsTheLoopInError) {
  net::io_context io;
  test::stream client(io, head + "BAD / HTTP/1.1\r\n\r\n");
  boost::beast::flat_buffer in(max_header);
  Seen seen;
  Served served;
  EXPECT_EQ(serve(io, client, in, seen, served), HeadResult::error);
  EXPECT_EQ(served.heads, (std::vector<std::string>{head}));
  EXPECT_EQ(seen.error.status, 400u);
}

}  // namespace
}  // namespace sluice::proxy
