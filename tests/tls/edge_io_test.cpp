#include "sluice/tls/edge_io.hpp"
#include "sluice/tls/stream.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

namespace sluice::tls::edge {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;

// A connected loopback pair: `ours` is waited on, `peer` writes to it.
struct EdgeIo : ::testing::Test {
  net::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)};
  tcp::socket peer{io};
  tcp::socket ours{io};
  // Outstanding work, as a worker always has: without it the io_context would stop, and not run
  // its reactor, once nothing is queued.
  net::executor_work_guard<net::io_context::executor_type> guard = net::make_work_guard(io);

  EdgeIo() {
    peer.connect(acceptor.local_endpoint());
    ours = acceptor.accept();
  }

  void send(const std::string& bytes) { net::write(peer, net::buffer(bytes)); }

  // Runs the io_context until `done` holds (the kernel delivers loopback bytes at once, but the
  // reactor sees them only at its next look), bounded.
  template <class Done>
  bool run_until(Done done) {
    for (int i = 0; i < 2000 && !done(); ++i) io.run_one_for(std::chrono::milliseconds(5));
    return done();
  }

  // A readiness wait on `s`; its outcome lands in `out`.
  template <class S>
  void wait_on(S& s, std::optional<error_code>& out) {
    async_wait_readable(s, [&out](error_code ec) { out = ec; });
  }
  // Whether the wait is still queued once everything ready has run (no try found bytes).
  bool queued(const std::optional<error_code>& waited) {
    io.poll();
    return !waited.has_value();
  }
  bool ends(const std::optional<error_code>& waited) {
    return run_until([&] { return waited.has_value(); });
  }

  // One read on `s` (`ours` by default), run to its completion. The buffer outlives a read that
  // does not complete.
  struct Read {
    std::optional<error_code> ec;
    std::string bytes;
  };
  template <class S>
  Read read_once(S& s) {
    struct State {
      Read read;
      std::array<char, 16> buffer{};
    };
    auto state = std::make_shared<State>();
    s.async_read_some(net::buffer(state->buffer), [state](error_code ec, std::size_t n) {
      state->read.ec = ec;
      state->read.bytes.assign(state->buffer.data(), n);
    });
    EXPECT_TRUE(run_until([&] { return state->read.ec.has_value(); }));
    return state->read;
  }
  Read read_once() { return read_once(ours); }
};

// The pool's peek said EAGAIN (no byte, no FIN, no error): the wait after it is queued for the
// next edge without a try, and new bytes end it.
TEST_F(EdgeIo, AWaitOnASocketProvedDrainedIsQueuedWithoutATry) {
  char byte;
  ASSERT_LT(::recv(ours.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT), 0);
  EXPECT_TRUE(will_try(ours));  // a new socket: never proved drained
  drained(ours);
  EXPECT_FALSE(will_try(ours));
  std::optional<error_code> waited;
  wait_on(ours, waited);
  EXPECT_TRUE(queued(waited));
  send("d");
  ASSERT_TRUE(ends(waited));
  EXPECT_FALSE(*waited);
  EXPECT_TRUE(will_try(ours));  // the edge came: the read that follows tries
  EXPECT_EQ(read_once().bytes, "d");
}

// A FIN that came with the last bytes is reported only by the read after them, and its edge is
// consumed: a short read is no proof of a drained socket, so the wait after it tries, and ends.
TEST_F(EdgeIo, AFinThatCameWithTheLastBytesEndsTheNextWait) {
  send("abc");
  peer.close();
  io.poll();  // the reactor sees the one edge, with nothing queued
  const auto r = read_once();
  ASSERT_FALSE(*r.ec);
  EXPECT_EQ(r.bytes, "abc");
  std::optional<error_code> waited;
  wait_on(ours, waited);
  ASSERT_TRUE(ends(waited));
  EXPECT_FALSE(*waited);
  EXPECT_EQ(*read_once().ec, net::error::eof);
}

TEST_F(EdgeIo, AWaitOnASocketWithBytesAlreadyThereCompletesAtOnce) {
  send("x");
  // Let the reactor see (or not see) the edge; either way the wait's first try finds the byte.
  io.poll();
  std::optional<error_code> waited;
  wait_on(ours, waited);
  ASSERT_TRUE(ends(waited));
  EXPECT_FALSE(*waited);
  EXPECT_EQ(read_once().bytes, "x");  // the wait took nothing: the byte is still there
}

TEST_F(EdgeIo, TheEndOfStreamEndsAQueuedWait) {
  drained(ours);
  std::optional<error_code> waited;
  wait_on(ours, waited);
  ASSERT_TRUE(queued(waited));
  peer.close();
  ASSERT_TRUE(ends(waited));
  EXPECT_FALSE(*waited);
  EXPECT_EQ(*read_once().ec, net::error::eof);
}

TEST_F(EdgeIo, CancelAndCloseEndAQueuedWait) {
  std::optional<error_code> waited;
  wait_on(ours, waited);
  ASSERT_TRUE(queued(waited));
  ours.cancel();
  ASSERT_TRUE(ends(waited));
  EXPECT_EQ(*waited, net::error::operation_aborted);

  std::optional<error_code> again;
  wait_on(ours, again);
  ASSERT_TRUE(queued(again));
  ours.close();
  ASSERT_TRUE(ends(again));
  EXPECT_EQ(*again, net::error::operation_aborted);
}

TEST_F(EdgeIo, APerOperationCancellationSlotEndsOnlyThatOperation) {
  net::cancellation_signal signal;
  std::optional<error_code> waited;
  async_wait_readable(ours, net::bind_cancellation_slot(signal.slot(), [&](error_code ec) { waited = ec; }));
  ASSERT_TRUE(queued(waited));
  signal.emit(net::cancellation_type::terminal);
  ASSERT_TRUE(ends(waited));
  EXPECT_EQ(*waited, net::error::operation_aborted);
  // The socket is still good: a read on it gets what the peer sends next.
  send("ok");
  EXPECT_EQ(read_once().bytes, "ok");
}

// readable(): the wait awaited by an asio::awaitable coroutine with no coroutine of its own. The
// coroutine is suspended until the wait ends, gets its outcome in its own variable, and can wait
// again (its thread of execution goes from one wait's handler to the next's).
struct AwaitedWaits {
  std::vector<error_code> outcomes;
  bool finished = false;
};

net::awaitable<void> await_waits(tcp::socket& s, AwaitedWaits& out, int waits) {
  for (int i = 0; i < waits; ++i) {
    error_code ec = net::error::fault;  // overwritten by the wait's outcome
    co_await readable(s, ec);
    out.outcomes.push_back(ec);
    if (ec) break;
    std::array<char, 16> buffer{};
    s.read_some(net::buffer(buffer), ec);  // what made it readable, so that the next one waits
  }
  out.finished = true;
}

TEST_F(EdgeIo, ReadableResumesTheAwaitingCoroutineWithTheOutcomeEachTime) {
  AwaitedWaits waits;
  std::exception_ptr failed;
  net::co_spawn(io, await_waits(ours, waits, 3), [&](std::exception_ptr e) { failed = e; });
  io.poll();
  EXPECT_TRUE(waits.outcomes.empty());  // suspended: nothing to read yet
  for (int i = 1; i <= 2; ++i) {
    send("x");
    ASSERT_TRUE(run_until([&] { return waits.outcomes.size() == static_cast<std::size_t>(i); }));
    EXPECT_FALSE(waits.outcomes.back());
    io.poll();
    EXPECT_EQ(waits.outcomes.size(), static_cast<std::size_t>(i));  // waiting again
  }
  ours.close();  // the third wait ends aborted, and the coroutine runs to its end
  ASSERT_TRUE(run_until([&] { return waits.finished; }));
  ASSERT_EQ(waits.outcomes.size(), 3u);
  EXPECT_EQ(waits.outcomes.back(), net::error::operation_aborted);
  EXPECT_FALSE(failed);
}

// The wait's cancellation is the coroutine's, as with use_awaitable: a cancelled coroutine (here
// through co_spawn's slot; `||` of awaitable_operators cancels the same way) has its wait end.
TEST_F(EdgeIo, ReadableEndsWhenTheAwaitingCoroutineIsCancelled) {
  AwaitedWaits waits;
  net::cancellation_signal signal;
  net::co_spawn(io, await_waits(ours, waits, 1), net::bind_cancellation_slot(signal.slot(), [](std::exception_ptr) {}));
  io.poll();
  ASSERT_TRUE(waits.outcomes.empty());
  signal.emit(net::cancellation_type::terminal);
  ASSERT_TRUE(run_until([&] { return waits.finished; }));
  ASSERT_EQ(waits.outcomes.size(), 1u);
  EXPECT_EQ(waits.outcomes[0], net::error::operation_aborted);
  // The socket is still good, and the slot was let go: a new wait is not cancelled by it.
  AwaitedWaits again;
  net::co_spawn(io, await_waits(ours, again, 1), net::detached);
  send("ok");
  ASSERT_TRUE(run_until([&] { return again.finished; }));
  ASSERT_EQ(again.outcomes.size(), 1u);
  EXPECT_FALSE(again.outcomes[0]);
}

// Stream::readable() on a plain stream is the same wait (queued without a try on a socket
// proved drained).
TEST_F(EdgeIo, StreamReadableWaitsForTheKernelsBytes) {
  Stream stream(std::move(ours));
  std::array<char, 16> buffer{};
  EXPECT_EQ(stream.try_read_some(net::buffer(buffer)), 0u);  // proves it drained
  std::optional<error_code> waited;
  net::co_spawn(io, [&]() -> net::awaitable<void> {
    error_code ec;
    co_await stream.readable(ec);
    waited = ec;
  }, net::detached);
  EXPECT_TRUE(queued(waited));
  send("abc");
  ASSERT_TRUE(ends(waited));
  EXPECT_FALSE(*waited);
  EXPECT_EQ(stream.try_read_some(net::buffer(buffer)), 3u);
}

// With TLS the wait completes at once, with nothing from the kernel (decrypted bytes may sit in
// the TLS engine): the read that follows does the waiting.
TEST_F(EdgeIo, StreamReadableOnTlsCompletesAtOnce) {
  net::ssl::context tls_context(net::ssl::context::tls_client);
  Stream tls(std::move(ours));
  tls.start_tls(tls_context);
  std::optional<error_code> waited;
  net::co_spawn(io, [&]() -> net::awaitable<void> {
    error_code ec = net::error::fault;
    co_await tls.readable(ec);
    waited = ec;
  }, net::detached);
  io.poll();
  ASSERT_TRUE(waited.has_value());
  EXPECT_FALSE(*waited);
}

// The handler a readiness wait resumes runs in one turn: the clock is read once for it, and every
// SteadyClock::now() in it answers that reading; after it the clock moves on.
TEST_F(EdgeIo, AResumedHandlerRunsInOneTurnOfTheClock) {
  const SteadyClock clock;
  const auto before = clock.now();
  std::vector<Clock::time_point> seen;
  async_wait_readable(ours, [&](error_code) {
    seen.push_back(clock.now());
    while (SteadyClock::read() == seen.front()) {}  // the clock itself moves on...
    seen.push_back(clock.now());                    // ...the turn's reading does not
  });
  send("x");
  ASSERT_TRUE(run_until([&] { return seen.size() == 2; }));
  EXPECT_GE(seen[0], before);
  EXPECT_EQ(seen[1], seen[0]);
  EXPECT_EQ(detail::turn_time, Clock::time_point{});  // out of the turn: the clock again
  EXPECT_GT(clock.now(), seen[0]);
}

// Stream::try_read_some: the session's first step when it has nothing buffered.
TEST_F(EdgeIo, TryReadSomeTakesWhatIsThereOrProvesTheSocketDrained) {
  Stream stream(std::move(ours));
  std::array<char, 16> buffer{};
  EXPECT_EQ(stream.try_read_some(net::buffer(buffer)), 0u);  // nothing yet: EAGAIN...
  EXPECT_FALSE(will_try(stream.socket()));                   // ...which proves it drained
  std::optional<error_code> waited;
  stream.async_wait_readable([&](error_code ec) { waited = ec; });
  EXPECT_TRUE(queued(waited));  // queued without a try
  send("GET / HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(ends(waited));
  EXPECT_EQ(stream.try_read_some(net::buffer(buffer.data(), 4)), 4u);  // at most the buffer
  EXPECT_EQ(std::string(buffer.data(), 4), "GET ");
  EXPECT_EQ(stream.try_read_some(net::buffer(buffer)), 14u);
  EXPECT_EQ(stream.try_read_some(net::buffer(buffer)), 0u);
  EXPECT_FALSE(will_try(stream.socket()));
}

TEST_F(EdgeIo, TryReadSomeLeavesTheEndOfStreamToTheReadThatFollows) {
  Stream stream(std::move(ours));
  peer.close();
  std::array<char, 16> buffer{};
  EXPECT_EQ(stream.try_read_some(net::buffer(buffer)), 0u);
  // Not proved drained: the wait that follows tries, sees the end at once, and the read says so.
  std::optional<error_code> waited;
  stream.async_wait_readable([&](error_code ec) { waited = ec; });
  ASSERT_TRUE(ends(waited));
  EXPECT_EQ(*read_once(stream).ec, net::error::eof);
}

TEST_F(EdgeIo, AcceptNowTakesAConnectionNonBlockingAndCloseOnExec) {
  tcp::endpoint peer;
  error_code ec;
  auto none = accept_now(acceptor, peer, ec);
  EXPECT_EQ(ec, net::error::would_block);  // nothing waiting (the fixture took its one)...
  EXPECT_FALSE(none.is_open());
  EXPECT_FALSE(will_try(acceptor));  // ...which proves the backlog empty
  std::optional<error_code> waited;
  wait_on(acceptor, waited);
  EXPECT_TRUE(queued(waited));  // queued without a try
  tcp::socket client(io);
  client.connect(acceptor.local_endpoint());
  ASSERT_TRUE(ends(waited));
  EXPECT_FALSE(*waited);
  auto accepted = accept_now(acceptor, peer, ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(accepted.is_open());
  EXPECT_EQ(peer, client.local_endpoint());
  const int fd = accepted.native_handle();
  EXPECT_NE(::fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
  EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  // Not a duplicate: its close needs no EPOLL_CTL_DEL first.
  EXPECT_EQ(impl(accepted).state_ & asio_detail::socket_ops::possible_dup, 0);
  // Asio's own operations work on it (and need no ioctl: it knows the socket is non-blocking).
  net::write(client, net::buffer("hi", 2));
  EXPECT_EQ(read_once(accepted).bytes, "hi");
}

// Worker::add_listener sets TCP_NODELAY on the listener only: what Linux does for it.
TEST_F(EdgeIo, AcceptedConnectionsInheritTcpNoDelayFromTheListener) {
  acceptor.set_option(tcp::no_delay(true));
  tcp::socket client(io);
  client.connect(acceptor.local_endpoint());
  tcp::endpoint peer;
  error_code ec;
  std::optional<tcp::socket> accepted;
  ASSERT_TRUE(run_until([&] {
    auto s = accept_now(acceptor, peer, ec);
    if (s.is_open()) accepted.emplace(std::move(s));
    return accepted.has_value();
  }));
  tcp::no_delay option;
  accepted->get_option(option);
  EXPECT_TRUE(option.value());
}

// Stream::try_write: the session's first step for a head and body it has in hand.
TEST_F(EdgeIo, TryWriteSendsWhatTheKernelTakesAtOnce) {
  Stream stream(std::move(ours));
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n";
  const std::array<net::const_buffer, 3> out{net::buffer(head), net::const_buffer(), net::buffer("hi", 2)};
  EXPECT_EQ(stream.try_write(out), head.size() + 2);  // empty buffers are skipped
  std::string got(head.size() + 2, '\0');
  net::read(peer, net::buffer(got));
  EXPECT_EQ(got, head + "hi");
}

TEST_F(EdgeIo, TryWriteStopsAtAFullSocketAndLeavesErrorsToTheWriteThatFollows) {
  Stream stream(std::move(ours));
  const std::string big(64 * 1024, 'x');
  std::size_t total = 0;
  for (int i = 0; i < 1000; ++i) {
    const auto n = stream.try_write(net::buffer(big));
    if (n == 0) break;  // EAGAIN: the peer does not read
    total += n;
  }
  EXPECT_GT(total, 0u);
  EXPECT_EQ(stream.try_write(net::buffer(big)), 0u);
  peer.close();
  // A reset or a broken pipe: 0 (no SIGPIPE), and the write after it reports the error.
  for (int i = 0; i < 100 && stream.try_write(net::buffer(big)) > 0; ++i) {
  }
  EXPECT_EQ(stream.try_write(net::buffer(big)), 0u);
  error_code ec;
  net::write(stream.socket(), net::buffer(big), ec);
  EXPECT_TRUE(ec);
}

TEST_F(EdgeIo, TryWriteLeavesTlsAndLongBufferSequencesToTheAsyncWrite) {
  std::array<net::const_buffer, 9> many;
  for (auto& b : many) b = net::buffer("x", 1);
  Stream plain(std::move(ours));
  EXPECT_TRUE(plain.writes_at_once());
  EXPECT_EQ(plain.try_write(many), 0u);
  EXPECT_EQ(plain.try_write(std::span(many.data(), 8)), 8u);
  net::ssl::context tls_context(net::ssl::context::tls_client);
  Stream tls(std::move(plain.socket()));
  tls.start_tls(tls_context);
  EXPECT_FALSE(tls.writes_at_once());  // so a caller need not prepare a write for it
  EXPECT_EQ(tls.try_write(net::buffer("x", 1)), 0u);
}

// Each io_context's sockets reach its own reactor, also when a new context is made where a
// destroyed one was, on the same thread (a per-thread cache keyed by address once handed out the
// destroyed one: the session tests crashed in epoll_reactor::start_op).
// Each context is made in the same storage, so that it has its predecessor's address, while
// blocks of a reactor's size hold the memory the predecessor's reactor had (so the new reactor is
// elsewhere): a reactor looked up by the context's address would be neither the new one nor usable.
TEST(EdgeIoReactor, ASocketReachesTheReactorOfItsOwnContext) {
  alignas(net::io_context) unsigned char storage[sizeof(net::io_context)];
  std::vector<std::unique_ptr<unsigned char[]>> held;
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 8; ++k) held.push_back(std::make_unique<unsigned char[]>(sizeof(Reactor)));
    auto* raw = new (storage) net::io_context;
    const auto destroy = [](net::io_context* c) { c->~io_context(); };
    std::unique_ptr<net::io_context, decltype(destroy)> io(raw, destroy);
    tcp::acceptor acceptor(*io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    tcp::socket client(*io);
    client.connect(acceptor.local_endpoint());
    auto& expected = net::use_service<Reactor>(*io);
    EXPECT_EQ(&reactor_of(client), &expected);
    tcp::socket unopened(*io);
    EXPECT_EQ(&reactor_of(unopened), &expected);
    std::optional<error_code> waited;
    async_wait_readable(acceptor, [&](error_code ec) { waited = ec; });
    tcp::socket other(*io);
    other.connect(acceptor.local_endpoint());
    for (int n = 0; n < 2000 && !waited; ++n) io->run_one_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(waited);
    EXPECT_FALSE(*waited);
  }
}

// Hang-up watching (watch_hangup): a short read proves a watched socket drained, unless the
// event that reported its bytes also reported a FIN.
struct WatchedSocket : EdgeIo {
  Stream stream{std::move(ours)};
  std::array<char, 16> buffer{};

  std::size_t try_read() { return stream.try_read_some(net::buffer(buffer)); }
  // Watched, then proved drained by an EAGAIN (the one proof a watch does not change).
  void watch_and_prove() {
    stream.watch_hangup();
    ASSERT_TRUE(hangup_watched(stream.socket()));
    ASSERT_EQ(try_read(), 0u);
    ASSERT_TRUE(stream.known_drained());
  }
  // A wait for the next edge, run until it ends.
  void wait_for_edge() {
    std::optional<error_code> waited;
    stream.async_wait_readable([&](error_code ec) { waited = ec; });
    ASSERT_TRUE(ends(waited));
    ASSERT_FALSE(*waited);
  }
};

TEST_F(WatchedSocket, AShortReadProvesTheSocketDrainedSoTheNextTryAndWaitCostNothing) {
  watch_and_prove();
  send("GET / HTTP/1.1\r\n\r\n");
  wait_for_edge();
  EXPECT_EQ(try_read(), 16u);  // as much as asked: no proof
  EXPECT_FALSE(stream.known_drained());
  EXPECT_EQ(try_read(), 2u);  // fewer: the kernel has nothing more, and no FIN was reported
  EXPECT_TRUE(stream.known_drained());
  EXPECT_FALSE(stream.worth_a_try());
  std::optional<error_code> waited;
  stream.async_wait_readable([&](error_code ec) { waited = ec; });
  EXPECT_TRUE(queued(waited));  // queued without a peek
  send("x");
  ASSERT_TRUE(ends(waited));
  EXPECT_EQ(try_read(), 1u);
}

TEST_F(WatchedSocket, AFinReportedWithTheBytesIsNotMistakenForADrainedSocket) {
  watch_and_prove();
  send("abc");
  peer.close();  // loopback: the FIN is there before the reactor looks, in the same event
  wait_for_edge();
  EXPECT_EQ(try_read(), 3u);
  EXPECT_FALSE(stream.known_drained());  // the event said EPOLLRDHUP
  EXPECT_TRUE(stream.worth_a_try());
  EXPECT_EQ(try_read(), 0u);  // the end of stream, left for the read that follows
  EXPECT_EQ(*read_once(stream).ec, net::error::eof);
}

TEST_F(WatchedSocket, AFinAfterAShortReadRaisesAnEdgeOfItsOwn) {
  watch_and_prove();
  send("abc");
  wait_for_edge();
  ASSERT_EQ(try_read(), 3u);
  ASSERT_TRUE(stream.known_drained());
  peer.close();
  wait_for_edge();  // queued without a try, ended by the FIN's own edge
  EXPECT_EQ(try_read(), 0u);
  EXPECT_EQ(*read_once(stream).ec, net::error::eof);
}

TEST_F(WatchedSocket, AShortReadBeforeTheWatchOrBeforeAnEagainProvesNothing) {
  send("abc");
  peer.shutdown(tcp::socket::shutdown_send);  // the FIN with the bytes, before any watch
  io.poll();
  ASSERT_EQ(try_read(), 3u);
  EXPECT_FALSE(stream.known_drained());
  // Watched now, but the FIN came before: until an EAGAIN, a short read is no proof.
  stream.watch_hangup();
  EXPECT_FALSE(stream.known_drained());
  EXPECT_TRUE(stream.worth_a_try());
  EXPECT_EQ(try_read(), 0u);  // the end of stream, not an EAGAIN
  EXPECT_FALSE(stream.known_drained());
  EXPECT_EQ(*read_once(stream).ec, net::error::eof);
}

TEST_F(WatchedSocket, TheWatchOutlivesAsioReRegisteringTheDescriptor) {
  watch_and_prove();
  // Asio's own wait re-registers the descriptor (epoll_ctl MOD) from its registered events.
  std::optional<error_code> waited;
  stream.socket().async_wait(tcp::socket::wait_read, [&](error_code ec) { waited = ec; });
  send("abc");
  peer.close();
  ASSERT_TRUE(ends(waited));
  EXPECT_TRUE(hangup_watched(stream.socket()));
  EXPECT_EQ(try_read(), 3u);
  EXPECT_FALSE(stream.known_drained());  // the hang-up was still reported
}

TEST_F(WatchedSocket, ATlsStreamIsNeverWatchedNorKnownDrained) {
  net::ssl::context tls_context(net::ssl::context::tls_client);
  Stream tls(std::move(stream.socket()));
  tls.start_tls(tls_context);
  tls.watch_hangup();
  EXPECT_FALSE(hangup_watched(tls.socket()));
  EXPECT_FALSE(tls.known_drained());
  EXPECT_FALSE(tls.worth_a_try());
}

}  // namespace
}  // namespace sluice::tls::edge
