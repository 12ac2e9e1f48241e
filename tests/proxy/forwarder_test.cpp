#include "sluice/proxy/forwarder.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "sluice/config/loader.hpp"
#include "sluice/runtime/snapshot.hpp"

#include "run_to_end.hpp"

namespace sluice::proxy {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using K = FailureKind;

TEST(AttemptWindow, PerTryDefaultsToTheResponseTimeoutAndTheDeadlineToAllTries) {
  ManualClock clock;
  config::UpstreamConfig u;
  u.response_timeout = seconds(30);
  u.retry.attempts = 3;
  const auto start = clock.now();
  auto w = AttemptWindow::of(u, start);
  EXPECT_EQ(w.per_try, seconds(30));
  EXPECT_EQ(w.deadline, start + seconds(90));
  EXPECT_EQ(w.try_until(start + seconds(10)), start + seconds(40));
  EXPECT_EQ(w.try_until(start + seconds(80)), start + seconds(90));  // the deadline bounds a try

  u.retry.per_try_timeout = seconds(2);
  u.retry.deadline = seconds(5);
  w = AttemptWindow::of(u, start);
  EXPECT_EQ(w.per_try, seconds(2));
  EXPECT_EQ(w.deadline, start + seconds(5));
}

TEST(RetryAfter, ALaterComebackThanTheDeadlineIsNotWaitedFor) {
  ManualClock clock;
  const auto now = clock.now();
  EXPECT_TRUE(retry_after_exceeds("10", now, now + seconds(5)));
  EXPECT_FALSE(retry_after_exceeds("5", now, now + seconds(5)));
  EXPECT_FALSE(retry_after_exceeds("0", now, now + seconds(5)));
  EXPECT_FALSE(retry_after_exceeds("", now, now));
  // An HTTP-date (or garbage) is not seconds: the retry is not refused on its account.
  EXPECT_FALSE(retry_after_exceeds("Wed, 21 Oct 2015 07:28:00 GMT", now, now));
}

TEST(PooledIdleTime, TheOriginsShorterTimeoutWinsWithAMargin) {
  EXPECT_EQ(pooled_idle_time(seconds(30), std::nullopt), seconds(30));
  EXPECT_EQ(pooled_idle_time(seconds(30), seconds(5)), seconds(4));
  EXPECT_EQ(pooled_idle_time(seconds(30), seconds(2)), seconds(1));
  EXPECT_EQ(pooled_idle_time(seconds(3), seconds(60)), seconds(3));
}

TEST(AfterAttempt, AnAnswerIsDeliveredUnlessListedAndRetryable) {
  int asked = 0;
  const auto yes = [&] { ++asked; return true; };
  const auto no = [&] { ++asked; return false; };
  const auto ok = Failure::answered(200);
  const auto busy = Failure::answered(503);
  EXPECT_EQ(after_attempt(ok, false, true, yes), AfterAttempt::deliver);
  EXPECT_EQ(asked, 0);  // not listed: the budget is not asked (nor charged)
  EXPECT_EQ(after_attempt(busy, true, false, yes), AfterAttempt::deliver);
  EXPECT_EQ(asked, 0);  // the last attempt's answer goes to the client
  EXPECT_EQ(after_attempt(busy, true, true, no), AfterAttempt::deliver);
  EXPECT_EQ(after_attempt(busy, true, true, yes), AfterAttempt::retry);
  EXPECT_EQ(asked, 2);
}

TEST(AfterAttempt, AFailureIsRetriedWhenAllowedElseItStands) {
  int asked = 0;
  const auto yes = [&] { ++asked; return true; };
  const auto no = [&] { ++asked; return false; };
  const auto reset = Failure::of(K::reset_after_send);
  EXPECT_EQ(after_attempt(reset, false, false, yes), AfterAttempt::give_up);
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(after_attempt(reset, false, true, no), AfterAttempt::give_up);
  EXPECT_EQ(after_attempt(reset, false, true, yes), AfterAttempt::retry);
  EXPECT_EQ(asked, 2);
}


// ---- The attempt loop (forward_attempts) with scripted attempts: what each kind of request gets
// when its servers fail, on default settings unless a test says otherwise.

namespace net = boost::asio;

// What the hooks were told and what they answer: one scripted Failure per attempt on a server
// (an answer of 200 when its script is empty), the waits advance the manual clock.
struct Script {
  ManualClock* clock = nullptr;
  std::map<std::string, std::deque<Failure>> answers;  // by server identity
  std::vector<std::string> tried;                       // identities, in order
  std::vector<std::int64_t> in_flight_during;                   // the server's in-flight count in each try
  std::vector<Clock::duration> waits;
  std::optional<ProxyError> failed;                     // sluice's own answer
  std::string delivered_from, tunnel_on;
  int dropped = 0;
  bool open = true;          // the client side is still there
  int close_after_waits = -1;  // the client goes after this many waits
  bool replayable = true;
  std::string_view retry_after;
  std::vector<Clock::duration> try_windows;  // the time each try was given
  std::deque<Failure> by_try;  // the outcomes of the first tries, whichever their server
  std::function<void(std::size_t)> on_wait;  // told the number of waits so far
  int released_by_test = 0;  // slots of s1 that another request (the test) gave back meanwhile
  // The answer's delivery: at once (respond_now) or through respond(), and the reusability each
  // reports and delivered() was told.
  bool answers_at_once = false;
  bool reusable_answer = true;
  int responded_at_once = 0;
  int responded_later = 0;
  std::optional<bool> delivered_reusable;
};

// A failure after request bytes reached the server (what UpstreamExchange::attempt() reports).
Failure sent(FailureKind kind) {
  auto f = Failure::of(kind);
  f.request_bytes_sent = true;
  return f;
}

struct ScriptedHooks {
  Script* s;

  net::awaitable<Failure> attempt(Endpoint& ep, Clock::time_point try_until) {
    s->tried.push_back(ep.identity());
    s->in_flight_during.push_back(ep.in_flight());
    s->try_windows.push_back(try_until - s->clock->now());
    if (!s->by_try.empty()) {
      const auto f = s->by_try.front();
      s->by_try.pop_front();
      co_return f;
    }
    auto& queue = s->answers[ep.identity()];
    if (queue.empty()) co_return Failure::answered(200);
    const auto f = queue.front();
    queue.pop_front();
    co_return f;
  }
  net::awaitable<bool> tunnel(Endpoint& ep) {
    s->tunnel_on = ep.identity();
    s->in_flight_during.push_back(ep.in_flight());
    co_return false;
  }
  bool respond_now(bool& reusable) {
    if (!s->answers_at_once) return false;
    ++s->responded_at_once;
    reusable = s->reusable_answer;
    return true;
  }
  net::awaitable<bool> respond() {
    ++s->responded_later;
    co_return s->reusable_answer;
  }
  bool delivered(Endpoint& ep, bool reusable) {
    s->delivered_from = ep.identity();
    s->delivered_reusable = reusable;
    return true;
  }
  void drop() { ++s->dropped; }
  net::awaitable<void> fail(const ProxyError& error) {
    s->failed = error;
    co_return;
  }
  net::awaitable<bool> wait(Clock::duration d) {
    s->waits.push_back(d);
    s->clock->advance(d);
    if (s->on_wait) s->on_wait(s->waits.size());
    if (s->close_after_waits >= 0 && static_cast<int>(s->waits.size()) >= s->close_after_waits)
      s->open = false;
    co_return s->open;
  }
  bool replayable() const { return s->replayable; }
  std::string_view retry_after() const { return s->retry_after; }
  double uniform() { return 0.5; }
};

class ForwardLoop : public ::testing::Test {
protected:
  // An upstream "app" of `servers` servers named s1, s2, ...; `upstream_keys` go into
  // [upstreams.app], `tables` (starting with a table header) after it; `server_keys` into every
  // server.
  void configure(int servers, const std::string& upstream_keys = "", const std::string& tables = "",
                 const std::string& server_keys = "") {
    // One worker: the retry budget's reserve is split over the workers, so the counts would
    // depend on the machine's cores with the default (one per core).
    std::string text =
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[upstreams.app]\n" + upstream_keys + "\n";
    for (int i = 1; i <= servers; ++i) {
      text += "[[upstreams.app.servers]]\nname = \"s" + std::to_string(i) +
              "\"\naddress = \"127.0.0.1:" + std::to_string(9000 + i) + "\"\n" + server_keys + "\n";
    }
    text += tables;
    auto result = config::load_string(text, "forwarder_test.toml");
    std::string errors;
    for (const auto& e : result.errors) errors += e.to_string() + "\n";
    ASSERT_TRUE(result.ok()) << errors << text;
    snapshot_ = build_snapshot(
        std::make_shared<const config::Config>(std::move(*result.config)), directory_, 1);
    script_.clock = &clock_;
  }
  const Upstream& upstream() const { return *snapshot_->upstreams.front(); }
  Endpoint& server(int i) const { return *upstream().endpoint(static_cast<std::uint32_t>(i - 1)); }

  // One request through the loop; returns whether the client connection may carry another.
  bool forward(RequestFacts facts) {
    record_ = AttemptRecord{};
    std::vector<std::int64_t> before;
    for (const Endpoint* ep : upstream().endpoints()) before.push_back(ep->in_flight());
    Forwarder f(upstream(), clock_, 0, facts, PickContext{}, record_);
    const auto keep = test_support::run_to_end(io_, forward_attempts(ScriptedHooks{&script_}, f));
    EXPECT_TRUE(keep.has_value()) << "the loop did not finish";
    for (std::size_t i = 0; i < before.size(); ++i)
      EXPECT_EQ(upstream().endpoints()[i]->in_flight(),
                before[i] - (i == 0 ? script_.released_by_test : 0))
          << "s" << i + 1 << "'s in-flight count";
    return keep.value_or(false);
  }
  static RequestFacts get() { return {.idempotent_method = true}; }
  static RequestFacts post() { return {}; }
  static RequestFacts keyed_post() { return {.has_idempotency_key = true}; }

  ManualClock clock_;
  EndpointDirectory directory_{clock_};
  std::shared_ptr<const Snapshot> snapshot_;
  net::io_context io_;
  Script script_;
  AttemptRecord record_;
};

// The answer goes at once when the hooks can send it so, else through respond(); delivered() is
// told the reusability either way reported, and neither path is taken twice.
TEST_F(ForwardLoop, TheAnswerGoesAtOnceWhenItCanElseThroughRespond) {
  configure(1);
  for (const bool at_once : {true, false}) {
    for (const bool reusable : {true, false}) {
      script_ = Script{};
      script_.clock = &clock_;
      script_.answers_at_once = at_once;
      script_.reusable_answer = reusable;
      EXPECT_TRUE(forward(get()));
      EXPECT_EQ(script_.responded_at_once, at_once ? 1 : 0);
      EXPECT_EQ(script_.responded_later, at_once ? 0 : 1);
      EXPECT_EQ(script_.delivered_reusable, reusable);
    }
  }
}

TEST_F(ForwardLoop, AGetWhoseServerResetsIsAnsweredByTheNextServer) {
  configure(3);
  script_.answers["s1"] = {sent(K::reset_after_send)};
  EXPECT_TRUE(forward(get()));
  EXPECT_EQ(script_.tried, (std::vector<std::string>{"s1", "s2"}));
  EXPECT_EQ(script_.delivered_from, "s2");
  EXPECT_EQ(script_.dropped, 1);
  EXPECT_FALSE(script_.failed);
  EXPECT_EQ(record_.attempts, 2u);
  AttemptRecord::ServersText servers;
  EXPECT_EQ(record_.servers_tried(servers), "s1,s2");
  EXPECT_EQ(record_.server, &server(2));
  // Each try held its server's slot, and the backoff lay between them (25 ms x 0.5 jitter).
  EXPECT_EQ(script_.in_flight_during, (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(script_.waits, (std::vector<Clock::duration>{std::chrono::microseconds(12500)}));
}

TEST_F(ForwardLoop, APostThatReachedItsServerIsNeverSentAgain) {
  configure(3);
  for (const auto kind : {K::reset_after_send, K::response_timeout, K::bad_response}) {
    script_ = Script{};
    script_.clock = &clock_;
    script_.by_try.assign(3, sent(kind));
    EXPECT_FALSE(forward(post()));
    EXPECT_EQ(script_.tried.size(), 1u) << health::describe(kind);
    ASSERT_TRUE(script_.failed);
    EXPECT_EQ(script_.failed->status, status_of(kind));
    EXPECT_EQ(script_.failed->not_retried, "not idempotent") << health::describe(kind);
    EXPECT_EQ(record_.skip, RetrySkip::not_idempotent);
  }
}

TEST_F(ForwardLoop, APostIsSentAgainWhenItNeverReachedTheServerOrCarriesAKey) {
  configure(3);
  script_.answers["s1"] = {Failure::of(K::connect_refused)};
  EXPECT_TRUE(forward(post()));
  EXPECT_EQ(script_.delivered_from, "s2");

  script_ = Script{};
  script_.clock = &clock_;
  script_.by_try = {sent(K::reset_after_send)};
  EXPECT_TRUE(forward(keyed_post()));
  ASSERT_EQ(script_.tried.size(), 2u);
  EXPECT_NE(script_.tried[0], script_.tried[1]);
  EXPECT_EQ(script_.delivered_from, script_.tried[1]);
}

TEST_F(ForwardLoop, ABodyThatWasConsumedAndNotKeptIsNotSentAgain) {
  configure(2);
  script_.replayable = false;
  script_.answers["s1"] = {sent(K::reset_after_send)};
  EXPECT_FALSE(forward(get()));
  EXPECT_EQ(script_.tried.size(), 1u);
  EXPECT_EQ(record_.skip, RetrySkip::body_too_large);
}

// Fail-count loop: the first n tries fail, then a server answers. A GET is answered whenever a
// try is left (attempts = 3), each failure on another server; past that the last failure stands.
TEST_F(ForwardLoop, EveryTryFailingInTurnUntilNoneIsLeft) {
  configure(4, "", "[upstreams.app.retry]\nattempts = 3\n[upstreams.app.passive]\nmax_fails = 0\n");
  for (unsigned n = 0; n <= 4; ++n) {
    script_ = Script{};
    script_.clock = &clock_;
    script_.by_try.assign(n, Failure::of(K::connect_refused));
    const bool keep = forward(get());
    const auto tries = std::min(n + 1, 3u);
    EXPECT_EQ(script_.tried.size(), tries) << n;
    EXPECT_EQ(record_.attempts, tries) << n;
    EXPECT_EQ(std::set<std::string>(script_.tried.begin(), script_.tried.end()).size(), tries) << n;
    if (n < 3) {
      EXPECT_TRUE(keep) << n;
      EXPECT_FALSE(script_.delivered_from.empty()) << n;
      EXPECT_FALSE(script_.failed) << n;
      EXPECT_EQ(script_.dropped, static_cast<int>(n)) << n;
    } else {
      EXPECT_FALSE(keep) << n;
      ASSERT_TRUE(script_.failed) << n;
      EXPECT_EQ(script_.failed->status, 502u) << n;
      EXPECT_EQ(script_.failed->not_retried, "attempts exhausted") << n;
      EXPECT_EQ(record_.skip, RetrySkip::attempts_exhausted) << n;
    }
  }
}

TEST_F(ForwardLoop, AListed503IsRetriedAndTheLastAttemptsAnswerDelivered) {
  configure(2);
  script_.answers["s1"] = {Failure::answered(503)};
  script_.answers["s2"] = {Failure::answered(503)};
  EXPECT_TRUE(forward(get()));
  EXPECT_EQ(script_.tried.size(), 2u);
  EXPECT_EQ(script_.dropped, 1);
  EXPECT_FALSE(script_.failed);  // the origin's own 503 goes to the client, as an answer
  EXPECT_EQ(script_.delivered_from, "s2");
  EXPECT_EQ(record_.skip, RetrySkip::none);
}

TEST_F(ForwardLoop, A503AskingToComeBackAfterTheDeadlineIsDeliveredAtOnce) {
  configure(2, "", "[upstreams.app.retry]\ndeadline = \"5s\"\n");
  script_.answers["s1"] = {Failure::answered(503)};
  script_.retry_after = "60";
  EXPECT_TRUE(forward(get()));
  EXPECT_EQ(script_.tried.size(), 1u);
  EXPECT_EQ(record_.skip, RetrySkip::deadline);
}

TEST_F(ForwardLoop, NoServerLeftNoHealthyServerAndEveryServerDrained) {
  configure(1);
  script_.answers["s1"] = {Failure::of(K::connect_refused)};
  EXPECT_FALSE(forward(get()));
  ASSERT_TRUE(script_.failed);
  EXPECT_EQ(script_.failed->status, 502u);
  EXPECT_EQ(script_.failed->not_retried, "no other server to try");

  script_ = Script{};
  script_.clock = &clock_;
  server(1).set_draining(true);
  EXPECT_FALSE(forward(get()));
  ASSERT_TRUE(script_.failed);
  EXPECT_EQ(script_.failed->status, 503u);
  EXPECT_EQ(script_.failed->reason, "every server drained");
  EXPECT_TRUE(script_.tried.empty());
}

TEST_F(ForwardLoop, TheRetryBudgetBoundsRetriesUnderAnOutage) {
  // 20% of requests plus 1 retry per second of a 10 s window: 10 retries at first.
  configure(2, "", "[upstreams.app.retry]\nbudget_min_per_sec = 1\n[upstreams.app.passive]\nmax_fails = 0\n");
  int retried = 0, refused = 0;
  for (int i = 0; i < 30; ++i) {
    script_ = Script{};
    script_.clock = &clock_;
    script_.by_try.assign(2, sent(K::reset_after_send));
    forward(get());
    if (script_.tried.size() == 2) ++retried;
    if (record_.skip == RetrySkip::budget_exhausted) ++refused;
  }
  // 30 requests on a clock that does not move: 10 + 0.2 x 30 = 16 retries, every one of them
  // taken (each request wants one); the rest are refused by the budget.
  EXPECT_EQ(retried, 16);
  EXPECT_EQ(refused, 14);
}

TEST_F(ForwardLoop, TheDeadlineEndsTheRetriesWith504) {
  configure(3, "", "[upstreams.app.retry]\nattempts = 3\ndeadline = \"10ms\"\nbackoff = \"40ms\"\nbackoff_max = \"40ms\"\n");
  script_.answers["s1"] = {Failure::of(K::connect_refused)};
  EXPECT_FALSE(forward(get()));
  ASSERT_TRUE(script_.failed);
  EXPECT_EQ(script_.failed->status, 504u);
  EXPECT_EQ(record_.skip, RetrySkip::deadline);
  // The backoff (20 ms) was bounded by the deadline's 10 ms, and the first try given all of it.
  EXPECT_EQ(script_.waits, (std::vector<Clock::duration>{std::chrono::milliseconds(10)}));
  EXPECT_EQ(script_.try_windows.front(), std::chrono::milliseconds(10));
}

TEST_F(ForwardLoop, AClientGoneDuringTheBackoffGetsNoAnswerAndNoOtherTry) {
  configure(2);
  script_.answers["s1"] = {Failure::of(K::connect_refused)};
  script_.close_after_waits = 1;
  EXPECT_FALSE(forward(get()));
  EXPECT_EQ(script_.tried.size(), 1u);
  EXPECT_FALSE(script_.failed);
}

TEST_F(ForwardLoop, AClientThatFailedDuringTheTryEndsTheLoopWithoutAnAnswer) {
  configure(2);
  script_.answers["s1"] = {Failure::of(K::client_failed)};
  EXPECT_FALSE(forward(get()));
  EXPECT_EQ(script_.tried.size(), 1u);
  EXPECT_FALSE(script_.failed);
  EXPECT_EQ(script_.dropped, 0);
}

TEST_F(ForwardLoop, SwitchingProtocolsHoldsItsServerUntilTheTunnelEnds) {
  configure(1);
  script_.answers["s1"] = {Failure::answered(101)};
  EXPECT_FALSE(forward(get()));  // a tunnel is the connection's last use
  EXPECT_EQ(script_.tunnel_on, "s1");
  EXPECT_EQ(script_.in_flight_during, (std::vector<std::int64_t>{1, 1}));
}

TEST_F(ForwardLoop, AFailedAttemptCountsAgainstItsServer) {
  configure(2, "", "[upstreams.app.passive]\nmax_fails = 1\n");
  script_.answers["s1"] = {Failure::of(K::connect_refused)};
  EXPECT_TRUE(forward(get()));
  EXPECT_FALSE(server(1).available());  // ejected after its one allowed failure
  EXPECT_TRUE(server(2).available());
  EXPECT_EQ(server(1).counters(0).failures.load(), 1u);
}

TEST_F(ForwardLoop, AFullServerQueuesTheRequestUntilASlotIsFree) {
  configure(1, "queue_size = 2\nqueue_timeout = \"5ms\"\n", "", "max_conns = 1\n");
  ASSERT_TRUE(server(1).try_begin_request());  // another request holds the one slot
  EXPECT_FALSE(forward(get()));
  ASSERT_TRUE(script_.failed);
  EXPECT_EQ(script_.failed->status, 503u);
  EXPECT_EQ(script_.failed->reason, "queue timeout");
  EXPECT_EQ(script_.waits.size(), 5u);  // one look per queue_poll, until queue_timeout
  EXPECT_TRUE(script_.tried.empty());
  EXPECT_EQ(upstream().queue().size(), 0u);  // it left the queue

  // The slot frees during the third wait: the request takes it, and leaves the queue.
  script_ = Script{};
  script_.clock = &clock_;
  script_.on_wait = [&](std::size_t waits) {
    if (waits != 3) return;
    server(1).end_request();
    ++script_.released_by_test;
  };
  EXPECT_TRUE(forward(get()));
  EXPECT_EQ(script_.waits.size(), 3u);
  EXPECT_EQ(script_.delivered_from, "s1");
  EXPECT_EQ(script_.in_flight_during, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(upstream().queue().size(), 0u);
}

TEST_F(ForwardLoop, NoQueueOrAFullQueueAnswers503AtOnce) {
  configure(1, "", "", "max_conns = 1\n");
  ASSERT_TRUE(server(1).try_begin_request());
  EXPECT_FALSE(forward(get()));
  ASSERT_TRUE(script_.failed);
  EXPECT_EQ(script_.failed->reason, "no server available");
  EXPECT_TRUE(script_.waits.empty());
  server(1).end_request();
}

}  // namespace
}  // namespace sluice::proxy
