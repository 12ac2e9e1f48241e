// RedisStore against a fake Redis on loopback: the commands it sends (as RESP, word by word), how
// it reads each kind of reply, its per-worker pool (one connection reused, at most
// max_connections, SELECT once per connection), the one retry on a pooled connection that died,
// and the timeout that bounds a Redis that never answers.
//
// The store keeps its pools thread-local and closes them when the thread exits, so every scenario
// runs on a thread of its own whose io_context outlives it (the fixture's), as a worker's does.
#include "sluice/idempotency/redis_store.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>

namespace sluice::idempotency {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using Words = std::vector<std::string>;

constexpr auto nothrow = net::as_tuple(net::use_awaitable);

// One whole command out of `in` (an array of bulk strings, as redis-cli and hiredis send), or
// nullopt while more bytes are needed.
std::optional<Words> take_command(std::string& in) {
  std::size_t at = 0;
  const auto line = [&]() -> std::optional<std::string> {
    const auto end = in.find("\r\n", at);
    if (end == std::string::npos) return std::nullopt;
    auto text = in.substr(at, end - at);
    at = end + 2;
    return text;
  };
  const auto head = line();
  if (!head) return std::nullopt;
  if (head->empty() || (*head)[0] != '*') throw std::runtime_error("not a RESP array: " + *head);
  Words words;
  for (int n = std::stoi(head->substr(1)); n > 0; --n) {
    const auto size = line();
    if (!size) return std::nullopt;
    const auto len = std::stoul(size->substr(1));
    if (in.size() < at + len + 2) return std::nullopt;
    words.push_back(in.substr(at, len));
    at += len + 2;
  }
  in.erase(0, at);
  return words;
}

// A Redis that records every command per connection and answers with `reply` (RESP bytes).
// `reply` returning nullopt: no answer, the connection stays open (a Redis that hangs).
struct FakeRedis {
  explicit FakeRedis(net::io_context& io) : acceptor(io, {net::ip::make_address("127.0.0.1"), 0}) {}
  std::uint16_t port() const { return acceptor.local_endpoint().port(); }

  tcp::acceptor acceptor;
  std::function<net::awaitable<std::optional<std::string>>(const Words&)> reply;
  bool close_after_reply = false;  // the connection dies after each answer (a Redis restart)
  std::vector<std::vector<Words>> connections;  // per accepted connection, its commands

  void start() { net::co_spawn(acceptor.get_executor(), accept_loop(), net::detached); }

  net::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(nothrow);
      if (ec) co_return;
      connections.emplace_back();
      net::co_spawn(acceptor.get_executor(), serve(std::move(socket), connections.size() - 1), net::detached);
    }
  }

  net::awaitable<void> serve(tcp::socket socket, std::size_t index) {
    std::string in;
    std::array<char, 4096> buf;
    for (;;) {
      auto [ec, n] = co_await socket.async_read_some(net::buffer(buf), nothrow);
      if (ec) co_return;
      in.append(buf.data(), n);
      while (auto words = take_command(in)) {
        connections[index].push_back(*words);
        const auto answer = co_await reply(*words);
        if (!answer) continue;
        co_await net::async_write(socket, net::buffer(*answer), nothrow);
        if (close_after_reply) co_return;
      }
    }
  }
};

net::awaitable<std::optional<std::string>> constant(std::string bytes) { co_return bytes; }

struct RedisStoreTest : ::testing::Test {
  net::io_context io;
  FakeRedis redis{io};

  RedisStoreTest() {
    redis.reply = [](const Words& w) { return constant(w[0] == "SELECT" ? "+OK\r\n" : "$-1\r\n"); };
  }

  RedisAddress address(unsigned db = 0) const {
    RedisAddress a;
    a.ok = true;
    a.host = "127.0.0.1";
    a.port = redis.port();
    a.db = db;
    return a;
  }

  // Runs `scenario` to its end on a worker-like thread (bounded: a store that hangs fails here).
  void run(std::function<net::awaitable<void>()> scenario) {
    bool finished = false;
    std::exception_ptr failure;
    std::thread worker([&] {
      redis.start();
      net::co_spawn(io, scenario(), [&](std::exception_ptr e) {
        failure = e;
        finished = true;
        io.stop();
      });
      io.run_for(20s);
    });
    worker.join();
    ASSERT_TRUE(finished) << "the scenario did not end within 20 s";
    if (failure) std::rethrow_exception(failure);
  }

  std::vector<Words> all_commands() const {
    std::vector<Words> out;
    for (const auto& c : redis.connections) out.insert(out.end(), c.begin(), c.end());
    return out;
  }
};

TEST_F(RedisStoreTest, AClaimIsSetNxPxGetAndNilMeansTheCallerHoldsIt) {
  RedisStore store(address(), 1s);
  boost::system::result<Store::Value> first, second;
  redis.reply = [n = 0](const Words&) mutable {
    return constant(n++ == 0 ? "$-1\r\n" : "$11\r\nclaim-other\r\n");
  };
  run([&]() -> net::awaitable<void> {
    first = co_await store.set_if_absent(0, "idem:k", "claim-a", 1500ms);
    second = co_await store.set_if_absent(0, "idem:k", "claim-b", 90s);
  });
  ASSERT_TRUE(first && second);
  EXPECT_FALSE(first->has_value()) << "nil: the key was set, the claim is ours";
  EXPECT_EQ(second->value_or("<none>"), "claim-other") << "the value already there comes back";
  EXPECT_EQ(all_commands(), (std::vector<Words>{{"SET", "idem:k", "claim-a", "NX", "PX", "1500", "GET"},
                                                {"SET", "idem:k", "claim-b", "NX", "PX", "90000", "GET"}}));
}

TEST_F(RedisStoreTest, GetPutAndReleaseSendTheirCommands) {
  RedisStore store(address(), 1s);
  const std::string answer = "HTTP/1.1 200 OK\r\n\r\nbinary\0body";
  redis.reply = [&](const Words& w) {
    if (w[0] == "GET") return constant("$" + std::to_string(answer.size()) + "\r\n" + answer + "\r\n");
    if (w[0] == "EVAL") return constant(":1\r\n");
    return constant("+OK\r\n");
  };
  boost::system::error_code put_ec{net::error::fault}, release_ec{net::error::fault};
  boost::system::result<Store::Value> got;
  run([&]() -> net::awaitable<void> {
    put_ec = co_await store.put(0, "idem:k", answer, 250us);
    got = co_await store.get(0, "idem:k");
    release_ec = co_await store.remove_if(0, "idem:k", "claim-a");
  });
  EXPECT_FALSE(put_ec);
  EXPECT_FALSE(release_ec);
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ(**got, answer) << "a bulk string is binary-safe, CRLF included";
  const auto commands = all_commands();
  ASSERT_EQ(commands.size(), 3u);
  EXPECT_EQ(commands[0], (Words{"SET", "idem:k", answer, "PX", "1"})) << "a TTL under 1 ms is 1 ms, never 0";
  EXPECT_EQ(commands[1], (Words{"GET", "idem:k"}));
  ASSERT_EQ(commands[2].size(), 5u);
  EXPECT_EQ(commands[2][0], "EVAL");
  EXPECT_NE(commands[2][1].find("redis.call('GET', KEYS[1]) == ARGV[1]"), std::string::npos)
      << "only the claim's holder deletes it: " << commands[2][1];
  EXPECT_EQ((Words{commands[2][2], commands[2][3], commands[2][4]}), (Words{"1", "idem:k", "claim-a"}));
}

TEST_F(RedisStoreTest, AMissingKeyIsNoValueAndAnErrorReplyIsAnError) {
  RedisStore store(address(), 1s);
  redis.reply = [](const Words& w) {
    return constant(w[1] == "missing" ? "$-1\r\n" : "-WRONGTYPE Operation against a key\r\n");
  };
  boost::system::result<Store::Value> missing, wrong;
  boost::system::error_code put_ec;
  run([&]() -> net::awaitable<void> {
    missing = co_await store.get(0, "missing");
    wrong = co_await store.get(0, "list");
    put_ec = co_await store.put(0, "list", "v", 1s);
  });
  ASSERT_TRUE(missing);
  EXPECT_FALSE(missing->has_value());
  EXPECT_FALSE(wrong) << "a Redis error is no value";
  EXPECT_TRUE(put_ec);
  EXPECT_EQ(redis.connections.size(), 1u) << "an error reply leaves the connection usable";
}

TEST_F(RedisStoreTest, AReplyOfTheWrongKindIsAnError) {
  RedisStore store(address(), 1s);
  redis.reply = [](const Words&) { return constant(":42\r\n"); };
  boost::system::result<Store::Value> got, claimed;
  run([&]() -> net::awaitable<void> {
    got = co_await store.get(0, "k");
    claimed = co_await store.set_if_absent(0, "k", "v", 1s);
  });
  EXPECT_FALSE(got);
  EXPECT_FALSE(claimed);
}

TEST_F(RedisStoreTest, OneConnectionServesTheWorkersCommandsInTurn) {
  RedisStore store(address(), 1s);
  run([&]() -> net::awaitable<void> {
    for (int i = 0; i < 5; ++i) (void)co_await store.get(0, "k" + std::to_string(i));
  });
  ASSERT_EQ(redis.connections.size(), 1u);
  EXPECT_EQ(redis.connections[0].size(), 5u);
}

TEST_F(RedisStoreTest, ANonZeroDatabaseIsSelectedOncePerConnection) {
  RedisStore store(address(3), 1s);
  run([&]() -> net::awaitable<void> {
    (void)co_await store.get(0, "a");
    (void)co_await store.get(0, "b");
  });
  ASSERT_EQ(redis.connections.size(), 1u);
  EXPECT_EQ(redis.connections[0], (std::vector<Words>{{"SELECT", "3"}, {"GET", "a"}, {"GET", "b"}}));
}

TEST_F(RedisStoreTest, ARefusedSelectFailsTheCommandWithoutSendingIt) {
  RedisStore store(address(16), 1s);
  redis.reply = [](const Words&) { return constant("-ERR DB index is out of range\r\n"); };
  boost::system::result<Store::Value> got;
  run([&]() -> net::awaitable<void> { got = co_await store.get(0, "a"); });
  EXPECT_FALSE(got);
  EXPECT_EQ(all_commands(), (std::vector<Words>{{"SELECT", "16"}}));
}

TEST_F(RedisStoreTest, APooledConnectionThatDiedIsRetriedOnceOnAFreshOne) {
  RedisStore store(address(), 1s);
  redis.close_after_reply = true;  // Redis restarts after every answer
  boost::system::result<Store::Value> first, second;
  run([&]() -> net::awaitable<void> {
    first = co_await store.get(0, "a");
    second = co_await store.get(0, "b");
  });
  EXPECT_TRUE(first);
  EXPECT_TRUE(second) << "the dead pooled connection costs no error";
  ASSERT_EQ(redis.connections.size(), 2u);
  EXPECT_EQ(redis.connections[1], (std::vector<Words>{{"GET", "b"}}));
}

TEST_F(RedisStoreTest, AFreshConnectionThatFailsIsNotRetried) {
  RedisStore store(address(), 1s);
  redis.close_after_reply = true;
  redis.reply = [](const Words&) { return constant("not resp at all\r\n"); };
  boost::system::result<Store::Value> got;
  run([&]() -> net::awaitable<void> { got = co_await store.get(0, "a"); });
  EXPECT_FALSE(got);
  EXPECT_EQ(redis.connections.size(), 1u);
}

TEST_F(RedisStoreTest, ARedisThatNeverAnswersCostsTheTimeoutThenAnError) {
  constexpr auto timeout = 200ms;
  RedisStore store(address(), timeout);
  redis.reply = [](const Words&) -> net::awaitable<std::optional<std::string>> { co_return std::nullopt; };
  boost::system::result<Store::Value> got;
  std::chrono::steady_clock::duration took{};
  run([&]() -> net::awaitable<void> {
    const auto start = std::chrono::steady_clock::now();
    got = co_await store.get(0, "a");
    took = std::chrono::steady_clock::now() - start;
  });
  EXPECT_FALSE(got);
  EXPECT_GE(took, timeout) << "no error before the timeout";
  // The upper bound is the point (a request waits at most this); generous for a loaded machine.
  EXPECT_LT(took, timeout + 2s);
  EXPECT_EQ(redis.connections.size(), 1u) << "no second try once the deadline has passed";
}

TEST_F(RedisStoreTest, AnUnreachableRedisIsAnError) {
  std::uint16_t closed_port = 0;
  {
    tcp::acceptor probe(io, {net::ip::make_address("127.0.0.1"), 0});
    closed_port = probe.local_endpoint().port();
  }
  auto a = address();
  a.port = closed_port;
  RedisStore store(a, 1s);
  boost::system::result<Store::Value> got;
  boost::system::error_code put_ec;
  run([&]() -> net::awaitable<void> {
    got = co_await store.get(0, "a");
    put_ec = co_await store.put(0, "a", "v", 1s);
  });
  EXPECT_FALSE(got);
  EXPECT_TRUE(put_ec);
}

TEST_F(RedisStoreTest, AWorkerOpensAtMostMaxConnections) {
  RedisStore store(address(), 5s);
  constexpr unsigned callers = RedisStore::max_connections + 2;
  // Every answer waits until the pool is full, so that no connection frees up earlier.
  redis.reply = [this](const Words&) -> net::awaitable<std::optional<std::string>> {
    net::steady_timer poll(co_await net::this_coro::executor);
    while (redis.connections.size() < RedisStore::max_connections) {
      poll.expires_after(1ms);
      co_await poll.async_wait(nothrow);
    }
    co_return "$2\r\nok\r\n";
  };
  unsigned answered = 0;
  run([&]() -> net::awaitable<void> {
    const auto ex = co_await net::this_coro::executor;
    for (unsigned i = 0; i < callers; ++i)
      net::co_spawn(ex, [&]() -> net::awaitable<void> {
        const auto got = co_await store.get(0, "k");
        if (got && got->value_or("") == "ok") ++answered;
      }, net::detached);
    net::steady_timer poll(ex);
    while (answered < callers) {
      poll.expires_after(1ms);
      co_await poll.async_wait(nothrow);
    }
  });
  EXPECT_EQ(answered, callers) << "the callers beyond the bound wait for a connection";
  EXPECT_EQ(redis.connections.size(), RedisStore::max_connections);
}

TEST_F(RedisStoreTest, AHostNameIsResolvedWhenTheStoreIsMade) {
  auto a = address();
  a.host = "localhost";  // /etc/hosts: no DNS traffic
  EXPECT_NO_THROW(RedisStore(a, 1s));
}

}  // namespace
}  // namespace sluice::idempotency
