#include "sluice/idempotency/guard.hpp"

#include <gtest/gtest.h>

#include "../http/indexed_request.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "sluice/http/head_index.hpp"
#include "sluice/idempotency/memory_store.hpp"

namespace sluice::idempotency {
namespace {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using namespace std::chrono_literals;

// One upstream's guard over a memory store driven by a manual clock.
class GuardTest : public ::testing::Test {
protected:
  GuardTest() {
    upstream_.name = "app";
    upstream_.idempotency.mode = Mode::replay;
    backing_ = std::make_shared<Backing>();
    backing_->store_name = "memory";
    backing_->store = std::make_shared<MemoryStore>(clock_, 1 << 20);
    guard_ = std::make_shared<Guard>(upstream_, backing_, clock_);
  }

  struct Request {
    std::string key = "k-1";
    std::string body = "{\"amount\":1}";
    std::string authorization = "Bearer alice";
    std::string target = "/pay";
  };

  // Runs begin() to completion; returns the ticket.
  std::unique_ptr<Ticket> begin(const Request& r, bool closed = false) {
    http::Fields fields;
    fields.set("Idempotency-Key", r.key);
    fields.set(bhttp::field::authorization, r.authorization);
    const auto req = http::testing::indexed(fields, r.target);
    auto ticket = Ticket::make(guard_, req->head, bhttp::verb::post, false);
    EXPECT_TRUE(ticket);
    auto future = net::co_spawn(io_, ticket->begin(0, req->head, "POST", r.target, r.body, "127.0.0.1", closed),
                                net::use_future);
    io_.restart();
    io_.run();
    verdict_ = future.get();
    return ticket;
  }

  // The origin's answer relayed through `ticket`, on its `attempts`th try.
  void answer(Ticket& ticket, unsigned status, std::string_view body, unsigned attempts = 1) {
    const auto bytes = "HTTP/1.1 " + std::to_string(status) + " X\r\nX-Origin: app-1\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n";
    http::ResponseHead res;
    ASSERT_EQ(http::index_response_head(bytes, 4096, res).result, http::HeadScan::Result::complete) << bytes;
    ticket.capture_head(res, attempts);
    ticket.capture_body(body);
    ticket.capture_end();
    ticket.finish(0, io_.get_executor(), status);
  }

  ManualClock clock_;
  net::io_context io_;
  config::UpstreamConfig upstream_;
  std::shared_ptr<Backing> backing_;
  std::shared_ptr<const Guard> guard_;
  Ticket::Verdict verdict_{};
};

TEST_F(GuardTest, NoKeyNoTicket) {
  http::Fields fields;
  EXPECT_FALSE(Ticket::make(guard_, http::testing::indexed(fields)->head, bhttp::verb::post, false));
  fields.set("Idempotency-Key", "k");
  const auto keyed = http::testing::indexed(fields);
  EXPECT_FALSE(Ticket::make(nullptr, keyed->head, bhttp::verb::post, false));
  EXPECT_FALSE(Ticket::make(guard_, keyed->head, bhttp::verb::head, false));
  EXPECT_FALSE(Ticket::make(guard_, keyed->head, bhttp::verb::get, true)) << "an upgrade is not guarded";
  EXPECT_FALSE(Ticket::make(guard_, http::testing::indexed({})->head, bhttp::verb::post, false));
  EXPECT_TRUE(Ticket::make(guard_, keyed->head, bhttp::verb::post, false));
}

TEST_F(GuardTest, TheSecondRequestGetsTheFirstAnswerReplayed) {
  auto first = begin({});
  EXPECT_EQ(verdict_, Ticket::Verdict::forward);
  EXPECT_EQ(first->outcome(), Outcome::first);
  answer(*first, 201, "paid\n");

  auto second = begin({});
  ASSERT_EQ(verdict_, Ticket::Verdict::answered);
  EXPECT_EQ(second->outcome(), Outcome::replayed);
  const std::string out(second->response("id-2", true));
  EXPECT_TRUE(out.starts_with("HTTP/1.1 201 Created\r\n")) << out;
  EXPECT_NE(out.find("X-Origin: app-1\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Idempotent-Replayed: true\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("X-Request-Id: id-2\r\n"), std::string::npos) << out;
  EXPECT_TRUE(out.ends_with("\r\n\r\npaid\n")) << out;
  EXPECT_EQ(backing_->total(Outcome::first), 1u);
  EXPECT_EQ(backing_->total(Outcome::replayed), 1u);
}

// The origin's indexed head as the session captures it (less what the response splice drops):
// a replay repeats neither hop-by-hop lines (nor those Connection
// names), Sluice-*, the origin's framing (sluice writes its own), nor the origin's X-Request-Id
// and Idempotent-Replayed.
TEST_F(GuardTest, CaptureOfTheIndexedHeadKeepsOnlyTheEndToEndLines) {
  const std::string_view head =
      "HTTP/1.1 201 Created\r\nX-Origin: app-1\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n"
      "Sluice-Error: fake\r\nContent-Length: 5\r\nKeep-Alive: timeout=5\r\nX-Request-Id: o\r\n"
      "Idempotent-Replayed: no\r\nset-cookie:  a=1 \r\n\r\n";
  http::ResponseHead indexed;
  ASSERT_EQ(http::index_response_head(head, 4096, indexed).result, http::HeadScan::Result::complete);
  Request r;
  r.key = "k-index";
  auto first = begin(r);
  ASSERT_EQ(verdict_, Ticket::Verdict::forward);
  first->capture_head(indexed);
  first->capture_body("paid\n");
  first->capture_end();
  first->finish(0, io_.get_executor(), 201);
  auto second = begin(r);
  ASSERT_EQ(verdict_, Ticket::Verdict::answered);
  const std::string replay(second->response("id-2", true));
  EXPECT_EQ(replay, "HTTP/1.1 201 Created\r\nX-Origin: app-1\r\nset-cookie: a=1\r\nContent-Length: 5\r\n"
                    "Idempotent-Replayed: true\r\nX-Request-Id: id-2\r\n\r\npaid\n");
  EXPECT_NE(replay.find("X-Origin: app-1\r\nset-cookie: a=1\r\n"), std::string::npos) << replay;
  EXPECT_EQ(replay.find("fake"), std::string::npos) << replay;
  EXPECT_EQ(replay.find("X-Hop"), std::string::npos) << replay;
}

// A replay repeats the Sluice-Attempts its first answer carried, and like that answer only with
// error_detail = "full" (`detail`); an answer on the first try carries none.
TEST_F(GuardTest, AReplayCarriesTheAttemptsOfTheFirstExecution) {
  answer(*begin({}), 201, "paid\n", 3);
  for (const bool detail : {true, false}) {
    const std::string out(begin({})->response("id-2", true, detail));
    const std::string attempts = detail ? "Sluice-Attempts: 3\r\n" : "";
    EXPECT_EQ(out, "HTTP/1.1 201 Created\r\nX-Origin: app-1\r\nContent-Length: 5\r\n"
                   "Idempotent-Replayed: true\r\n" +
                       attempts + "X-Request-Id: id-2\r\n\r\npaid\n");
  }
  Request once;
  once.key = "k-once";
  answer(*begin(once), 201, "paid\n", 1);
  const std::string out(begin(once)->response("id-3", true, true));
  EXPECT_EQ(out.find("Sluice-Attempts"), std::string::npos) << out;
}

TEST_F(GuardTest, AfterTheReplayWindowTheRequestIsExecutedAgain) {
  answer(*begin({}), 200, "ok");
  clock_.advance(24h - 1s);
  EXPECT_EQ(begin({})->outcome(), Outcome::replayed);
  clock_.advance(1s);
  EXPECT_EQ(begin({})->outcome(), Outcome::first);
}

TEST_F(GuardTest, TheSameKeyWithAnotherBodyIs422) {
  answer(*begin({}), 200, "ok");
  Request other;
  other.body = "{\"amount\":1000}";
  auto t = begin(other);
  ASSERT_EQ(verdict_, Ticket::Verdict::answered);
  EXPECT_EQ(t->outcome(), Outcome::mismatch);
  const std::string out(t->response("", true));
  EXPECT_TRUE(out.starts_with("HTTP/1.1 422 ")) << out;
  EXPECT_NE(out.find("Content-Type: application/problem+json\r\n"), std::string::npos);
  EXPECT_NE(out.find("\"status\":422"), std::string::npos);
}

TEST_F(GuardTest, TwoTenantsWithTheSameKeyNeverMeet) {
  answer(*begin({}), 200, "alice");
  Request bob;
  bob.authorization = "Bearer bob";
  bob.body = "another body";
  EXPECT_EQ(begin(bob)->outcome(), Outcome::first);
}

TEST_F(GuardTest, AnAnswerNotListedInStoreStatusesReleasesTheClaim) {
  answer(*begin({}), 503, "busy");
  auto again = begin({});
  EXPECT_EQ(again->outcome(), Outcome::first) << "a 503 is not kept: the client may retry";
  answer(*again, 429, "slow down");
  EXPECT_EQ(begin({})->outcome(), Outcome::first) << "nor is a 429";
}

TEST_F(GuardTest, AnAnswerOverMaxStoredBodyIsRememberedAsExecuted) {
  auto first = begin({});
  answer(*first, 200, std::string(guard_->config().max_stored_body + 1, 'x'));
  auto second = begin({});
  EXPECT_EQ(second->outcome(), Outcome::conflict);
  EXPECT_TRUE(std::string(second->response("", true)).starts_with("HTTP/1.1 409 "));
}

TEST_F(GuardTest, AWaiterWhoseClientLeftGets409WithRetryAfter) {
  auto first = begin({});
  ASSERT_EQ(first->outcome(), Outcome::first);
  auto second = begin({}, true);
  EXPECT_EQ(second->outcome(), Outcome::conflict);
  const std::string out(second->response("", false));
  EXPECT_NE(out.find("Retry-After: 1\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Connection: close\r\n"), std::string::npos) << out;
}

TEST(StoreStatuses, ClassesCodesAnd429) {
  Config c;
  EXPECT_TRUE(c.stores_status(200));
  EXPECT_TRUE(c.stores_status(404));
  EXPECT_FALSE(c.stores_status(429));
  EXPECT_FALSE(c.stores_status(500));
  c.store_codes = {429};
  EXPECT_TRUE(c.stores_status(429));
}

TEST(RedisUrl, Parses) {
  auto a = parse_redis_url("redis://127.0.0.1:6380/2");
  ASSERT_TRUE(a.ok) << a.why;
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.db, 2u);
  a = parse_redis_url("redis://[::1]/");
  ASSERT_TRUE(a.ok) << a.why;
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, 6379);
  EXPECT_FALSE(parse_redis_url("http://x").ok);
  EXPECT_FALSE(parse_redis_url("redis://h:0/").ok);
  EXPECT_FALSE(parse_redis_url("redis://h/99").ok);
  EXPECT_FALSE(parse_redis_url("redis://user:pw@h/").ok);
}

}  // namespace
}  // namespace sluice::idempotency
