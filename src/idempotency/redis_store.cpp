#include "sluice/idempotency/redis_store.hpp"

#include <array>
#include <atomic>
#include <charconv>
#include <unordered_map>
#include <stdexcept>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace sluice::idempotency {

namespace net = boost::asio;
using boost::system::error_code;
using boost::system::result;
using tcp = net::ip::tcp;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);
// Deletes the key only if it still holds the caller's claim.
constexpr std::string_view release_script =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

std::string milliseconds(Clock::duration d) {
  const auto ms = std::max<long long>(1, std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  return std::to_string(ms);
}

std::atomic<std::uint64_t> next_store_id{1};

}  // namespace

// One connection to Redis, on one worker's executor. `generation` changes after each operation,
// so that a deadline timer that fired late never cancels the next operation.
struct RedisStore::Connection : std::enable_shared_from_this<Connection> {
  explicit Connection(const net::any_io_executor& ex) : socket(ex), timer(ex) {}
  tcp::socket socket;
  net::steady_timer timer;
  ReplyReader reader;
  std::uint64_t generation = 0;
  std::array<char, 16 * 1024> buffer;

  // Closes the socket at `deadline` unless the operation ended first.
  void arm(Clock::time_point deadline) {
    const auto gen = ++generation;
    timer.expires_at(std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(deadline.time_since_epoch())));
    timer.async_wait([self = shared_from_this(), gen](error_code ec) {
      if (!ec && self->generation == gen) {
        error_code ignored;
        self->socket.close(ignored);
      }
    });
  }
  void disarm() {
    ++generation;
    timer.cancel();
  }

  net::awaitable<result<Reply>> roundtrip(std::string_view bytes, Clock::time_point deadline) {
    arm(deadline);
    auto [wec, wn] = co_await net::async_write(socket, net::buffer(bytes.data(), bytes.size()), nothrow);
    if (wec) {
      disarm();
      co_return wec;
    }
    for (;;) {
      bool bad = false;
      if (auto reply = reader.next(bad)) {
        disarm();
        co_return std::move(*reply);
      }
      if (bad) break;
      auto [ec, n] = co_await socket.async_read_some(net::buffer(buffer), nothrow);
      if (ec) {
        disarm();
        co_return ec;
      }
      if (!reader.feed(std::string_view(buffer.data(), n))) break;
    }
    disarm();
    co_return error_code(net::error::invalid_argument);
  }
};

RedisStore::RedisStore(const RedisAddress& address, Clock::duration timeout)
    : db_(address.db), timeout_(timeout), id_(next_store_id.fetch_add(1, std::memory_order_relaxed)) {
  error_code ec;
  const auto ip = net::ip::make_address(address.host, ec);
  if (!ec) {
    endpoint_ = tcp::endpoint(ip, address.port);
    return;
  }
  net::io_context io;
  tcp::resolver resolver(io);
  const auto found = resolver.resolve(address.host, std::to_string(address.port), ec);
  if (ec || found.empty())
    throw std::runtime_error("idempotency store: cannot resolve redis host '" + address.host + "'");
  endpoint_ = found.begin()->endpoint();
}

// Pools of stores a reload dropped stay until their thread exits: a few idle connections.
RedisStore::~RedisStore() = default;

RedisStore::Pool& RedisStore::pool() {
  thread_local std::unordered_map<std::uint64_t, Pool> pools;
  return pools[id_];
}

net::awaitable<error_code> RedisStore::connect(Connection& c, Clock::time_point deadline) {
  c.arm(deadline);
  auto [ec] = co_await c.socket.async_connect(endpoint_, nothrow);
  c.disarm();
  if (ec) co_return ec;
  error_code ignored;
  c.socket.set_option(tcp::no_delay(true), ignored);
  if (db_ == 0) co_return error_code{};
  const std::string db = std::to_string(db_);
  const std::array<std::string_view, 2> select{"SELECT", db};
  const auto reply = co_await c.roundtrip(format_command(select), deadline);
  if (!reply) co_return reply.error();
  co_return reply->type == Reply::Type::status ? error_code{} : error_code(net::error::invalid_argument);
}

// An idle connection, a new one (up to max_connections per worker), or a wait for one to come
// back, until `deadline`.
net::awaitable<result<std::shared_ptr<RedisStore::Connection>>> RedisStore::acquire(
    Pool& pool, Clock::time_point deadline, bool& pooled) {
  const auto ex = co_await net::this_coro::executor;
  for (std::chrono::milliseconds pause{1};; pause = std::min(pause * 2, std::chrono::milliseconds(20))) {
    if (!pool.idle.empty()) {
      auto c = std::move(pool.idle.back());
      pool.idle.pop_back();
      pooled = true;
      co_return c;
    }
    if (pool.open < max_connections) {
      ++pool.open;
      auto c = std::make_shared<Connection>(ex);
      if (const auto ec = co_await connect(*c, deadline)) {
        --pool.open;
        co_return ec;
      }
      pooled = false;
      co_return c;
    }
    if (steady_clock().now() + pause >= deadline) co_return error_code(net::error::timed_out);
    net::steady_timer wait(ex, pause);
    co_await wait.async_wait(nothrow);
  }
}

net::awaitable<result<Reply>> RedisStore::command(unsigned,
                                                  std::span<const std::string_view> args) {
  auto& pool = this->pool();
  const auto deadline = steady_clock().now() + timeout_;
  const auto bytes = format_command(args);
  // A pooled connection may have died with a Redis restart: one more try on a fresh one.
  for (int tries = 0; tries < 2; ++tries) {
    bool pooled = false;
    auto c = co_await acquire(pool, deadline, pooled);
    if (!c) co_return c.error();
    auto reply = co_await (*c)->roundtrip(bytes, deadline);
    if (reply) {
      pool.idle.push_back(std::move(*c));
      if (reply->type == Reply::Type::error) co_return error_code(net::error::invalid_argument);
      co_return reply;
    }
    --pool.open;
    error_code ignored;
    (*c)->socket.close(ignored);
    if (!pooled || steady_clock().now() >= deadline) co_return reply.error();
  }
  co_return error_code(net::error::timed_out);
}

net::awaitable<result<Store::Value>> RedisStore::set_if_absent(unsigned worker, std::string_view key,
                                                               std::string_view value,
                                                               Clock::duration ttl) {
  const auto ms = milliseconds(ttl);
  const std::array<std::string_view, 7> args{"SET", key, value, "NX", "PX", ms, "GET"};
  auto reply = co_await command(worker, args);
  if (!reply) co_return reply.error();
  if (reply->type == Reply::Type::nil) co_return Value{};
  if (reply->type != Reply::Type::string) co_return error_code(net::error::invalid_argument);
  co_return Value(std::move(reply->str));
}

net::awaitable<result<Store::Value>> RedisStore::get(unsigned worker, std::string_view key) {
  const std::array<std::string_view, 2> args{"GET", key};
  auto reply = co_await command(worker, args);
  if (!reply) co_return reply.error();
  if (reply->type == Reply::Type::nil) co_return Value{};
  if (reply->type != Reply::Type::string) co_return error_code(net::error::invalid_argument);
  co_return Value(std::move(reply->str));
}

net::awaitable<error_code> RedisStore::put(unsigned worker, std::string_view key,
                                           std::string_view value, Clock::duration ttl) {
  const auto ms = milliseconds(ttl);
  const std::array<std::string_view, 5> args{"SET", key, value, "PX", ms};
  const auto reply = co_await command(worker, args);
  co_return reply ? error_code{} : reply.error();
}

net::awaitable<error_code> RedisStore::remove_if(unsigned worker, std::string_view key,
                                                 std::string_view expected) {
  const std::array<std::string_view, 5> args{"EVAL", release_script, "1", key, expected};
  const auto reply = co_await command(worker, args);
  co_return reply ? error_code{} : reply.error();
}

}  // namespace sluice::idempotency
