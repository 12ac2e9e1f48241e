// The upstream exchange driven by the Forwarder's loop from a client side that is not the HTTP/1.1
// session: a plain struct implementing ClientSide, over real loopback origins (the session
// tests' harness, without a session). What it proves: the exchange needs nothing of the session
// but ClientSide, for a retry on a second server, interim heads (a 100 kept, a 103 passed on), a
// streamed upload, and an origin that cuts its answer's head.
#include "sluice/proxy/upstream_exchange.hpp"

#include <optional>
#include <string>
#include <vector>

#include "session_harness.hpp"

namespace sluice::proxy {
namespace {

using namespace session_test;

// The client side: a GET (or a streamed POST) whose head is fixed, and what reached it.
struct TestSide final : ClientSide {
  std::string head = "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n";
  std::vector<std::string> pieces;  // a streamed body's pieces, in order (empty: no body)
  std::size_t next = 0;
  std::vector<unsigned> interims;   // the interim heads passed on
  std::vector<std::string> sent;    // the pieces the exchange said reached the origin

  std::string_view forward_head() override { return head; }
  RequestBody request_body() override {
    if (pieces.empty()) return {};
    return {.kept = {}, .streamed = true, .chunked = false, .done = false};
  }
  bool resendable() const override { return pieces.empty(); }
  bool accepts_switch(const http::ResponseHead&) const override { return false; }
  net::awaitable<InterimFate> interim(const http::ResponseHead& h) override {
    interims.push_back(h.status());
    co_return InterimFate::written;
  }
  net::awaitable<UploadPiece> next_piece() override {
    const auto& p = pieces.at(next++);
    co_return UploadPiece{p, next == pieces.size(), {}};
  }
  void piece_sent(std::string_view piece) override { sent.emplace_back(piece); }
  void cancel_read() override {}
};

// The session's part for the exchange's I/O: its deadline (enforced by no tick here).
struct TestLink final : SessionLink {
  void expire() override {}
  void close_if_idle() override {}
  void close() override {}
  bool holds_upstream() const noexcept override { return false; }
};

// What the loop ended with: the answer delivered (its status and body), or sluice's own error.
struct Outcome {
  bool done = false;
  unsigned status = 0;
  std::string body;
  std::optional<ProxyError> error;
};

// forward_attempts()'s hooks over the exchange and the test side: an answer is delivered from
// what came with its head (the tests' answers are small).
struct Loop {
  UpstreamExchange& up;
  TestSide& side;
  Outcome& out;

  net::awaitable<Failure> attempt(Endpoint& ep, Clock::time_point try_until) {
    return up.attempt(side, ep, try_until);
  }
  net::awaitable<bool> tunnel(Endpoint&) { co_return false; }
  bool respond_now(bool& reusable) {
    out.status = up.response().status();
    const auto length = up.response().content_length().value_or(0);
    out.body.assign(static_cast<const char*>(up.in().data().data()), up.in().size());
    reusable = out.body.size() == length && up.response().keep_alive(false);
    up.in().consume(up.in().size());
    return true;
  }
  net::awaitable<bool> respond() { co_return false; }
  bool delivered(Endpoint& ep, bool reusable) {
    up.deliver_done(ep, reusable, std::nullopt);
    return true;
  }
  void drop() { up.drop(); }
  net::awaitable<void> fail(const ProxyError& e) {
    out.error = e;
    co_return;
  }
  net::awaitable<bool> wait(Clock::duration) { co_return true; }
  bool replayable() const { return side.pieces.empty(); }
  std::string_view retry_after() const { return up.retry_after(); }
  double uniform() { return 0.0; }
};

class UpstreamExchangeTest : public SessionHarness {
protected:
  UpstreamExchangeTest() { arena_.attach(arena_block_, sizeof arena_block_); }

  const Upstream& app() const { return *worker_.snapshot->upstreams.at(0); }

  // One request through the Forwarder's loop and the exchange, run to its end.
  Outcome forward(TestSide& side) {
    const PoolAllocator<char> blocks(&worker_.head_blocks);
    exchange_.start(worker_.snapshot->config->server.max_header_bytes, blocks);
    record_ = AttemptRecord{};
    exchange_.begin(app(), record_, worker_.snapshot->config->server.max_header_bytes, false);
    forwarder_.emplace(app(), worker_.clock, worker_.index,
                       RequestFacts{.idempotent_method = side.pieces.empty(), .has_idempotency_key = false,
                                    .body_kept = side.pieces.empty()},
                       PickContext{}, record_);
    Outcome out;
    net::co_spawn(io_, forward_attempts(Loop{exchange_, side, out}, *forwarder_),
                  [&](std::exception_ptr e, bool) {
                    EXPECT_FALSE(e);
                    out.done = true;
                  });
    EXPECT_TRUE(run_until([&] { return out.done; }));
    exchange_.end();
    return out;
  }

  alignas(std::max_align_t) char arena_block_[8 * 1024];
  Arena arena_;
  TestLink link_;
  bool timed_out_ = false;
  UpstreamExchange exchange_{worker_, link_, timed_out_, arena_};
  AttemptRecord record_;
  std::optional<Forwarder> forwarder_;
};

TEST_F(UpstreamExchangeTest, AnAnswerComesBackAndItsConnectionGoesToThePool) {
  configure();
  TestSide side;
  const auto out = forward(side);
  EXPECT_EQ(out.status, 200u);
  EXPECT_EQ(out.body, "ok");
  EXPECT_FALSE(out.error);
  ASSERT_EQ(origin_.accepted(), 1u);
  EXPECT_EQ(origin_.connections[0]->received, side.head);
  EXPECT_EQ(worker_.pool.idle_count(), 1u);
  EXPECT_EQ(record_.attempts, 1u);
  EXPECT_NE(record_.first_byte, Clock::time_point{});
}

// Two servers, the first listed refusing connections: round robin starts with either, so of two
// requests one meets the refusal first and goes on to the origin in a second attempt.
TEST_F(UpstreamExchangeTest, AServerRefusingTheConnectionIsFollowedByTheNext) {
  tcp::acceptor closed(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  const auto refused_port = closed.local_endpoint().port();
  closed.close();
  configure("", "[[upstreams.app.servers]]\naddress = \"127.0.0.1:" + std::to_string(refused_port) + "\"\n",
            "retry = { attempts = 2 }");
  unsigned attempts = 0;
  for (int i = 0; i < 2; ++i) {
    TestSide side;
    const auto out = forward(side);
    EXPECT_EQ(out.status, 200u);
    EXPECT_FALSE(out.error);
    attempts += record_.attempts;
  }
  EXPECT_EQ(attempts, 3u);
  EXPECT_EQ(origin_.requests(), 2u);
}

TEST_F(UpstreamExchangeTest, A103GoesToTheClientSideAndA100DoesNot) {
  configure();
  origin_.response =
      "HTTP/1.1 100 Continue\r\n\r\n"
      "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  TestSide side;
  const auto out = forward(side);
  EXPECT_EQ(side.interims, std::vector<unsigned>{103});
  EXPECT_EQ(out.status, 200u);
  EXPECT_EQ(out.body, "ok");
}

TEST_F(UpstreamExchangeTest, AStreamedBodyGoesPieceByPieceBehindTheHeadAndTheAnswerFollows) {
  configure();
  TestSide side;
  side.head = "POST /up HTTP/1.1\r\nHost: app.test\r\nContent-Length: 9\r\n\r\n";
  side.pieces = {"abc", "def", "ghi"};
  const auto out = forward(side);
  EXPECT_EQ(out.status, 200u);
  ASSERT_EQ(origin_.accepted(), 1u);
  EXPECT_EQ(origin_.connections[0]->received, side.head + "abcdefghi");
  EXPECT_EQ(side.sent, side.pieces);
  EXPECT_FALSE(exchange_.request_unsent());
}

// An origin that closes in the middle of its answer's head: the attempt failed after the request
// was sent, which a single attempt does not retry: sluice's own 502, nothing delivered.
TEST_F(UpstreamExchangeTest, AnAnswerCutInItsHeadIsTheAttemptsFailure) {
  configure();
  origin_.response = "HTTP/1.1 200 OK\r\nContent-Len";
  origin_.after = Origin::After::close;
  TestSide side;
  const auto out = forward(side);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->status, 502u);
  EXPECT_EQ(out.status, 0u);
  EXPECT_EQ(worker_.pool.idle_count(), 0u);
  EXPECT_FALSE(exchange_.in_use());
}

}  // namespace
}  // namespace sluice::proxy
