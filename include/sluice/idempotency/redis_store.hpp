#pragma once
// The fleet store: claims and answers in Redis, so that every sluice instance behind an L4
// balancer sees the same keys. Commands (Redis >= 7.0):
//   claim    SET key value NX PX ttl GET   (nil: we hold it; else the value already there)
//   answer   SET key value PX ttl
//   release  EVAL "if GET == ARGV[1] then DEL" (only the claim's holder releases it)
// I/O on Asio, on the calling worker's executor; hiredis only encodes and parses (resp.hpp).
// Each worker has its own bounded pool of connections (max_connections), touched only by that
// worker's thread: it is thread-local, so that the connections are closed on their own thread
// when it exits, while its io_context still exists (a store released last by the control
// thread, after the workers, would otherwise close sockets of a destroyed io_context). Every operation, connect included, ends within `timeout`: a Redis that is
// down or slow costs a request at most that, then an error the guard turns into on_store_error.
#include <array>
#include <memory>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "sluice/config/idempotency.hpp"
#include "sluice/idempotency/resp.hpp"
#include "sluice/idempotency/store.hpp"

namespace sluice::idempotency {

class RedisStore final : public Store {
public:
  static constexpr unsigned max_connections = 8;

  // Control thread: resolves the host (may block on DNS). Throws std::runtime_error.
  RedisStore(const RedisAddress& address, Clock::duration timeout);
  ~RedisStore() override;

  boost::asio::awaitable<boost::system::result<Value>> set_if_absent(
      unsigned worker, std::string_view key, std::string_view value, Clock::duration ttl) override;
  boost::asio::awaitable<boost::system::result<Value>> get(unsigned worker,
                                                           std::string_view key) override;
  boost::asio::awaitable<boost::system::error_code> put(unsigned worker, std::string_view key,
                                                        std::string_view value,
                                                        Clock::duration ttl) override;
  boost::asio::awaitable<boost::system::error_code> remove_if(unsigned worker, std::string_view key,
                                                              std::string_view expected) override;
  StoreStats stats() const override { return {0, 0, 0, false}; }
  std::string_view kind() const noexcept override { return "redis"; }

  struct Connection;

private:
  struct Pool {
    std::vector<std::shared_ptr<Connection>> idle;
    unsigned open = 0;
  };
  Pool& pool();  // the calling thread's
  // One command, its reply; an error when Redis cannot be reached or answers with an error.
  boost::asio::awaitable<boost::system::result<Reply>> command(unsigned worker,
                                                               std::span<const std::string_view> args);
  boost::asio::awaitable<boost::system::result<std::shared_ptr<Connection>>> acquire(
      Pool& pool, Clock::time_point deadline, bool& pooled);
  boost::asio::awaitable<boost::system::error_code> connect(Connection& c, Clock::time_point deadline);

  boost::asio::ip::tcp::endpoint endpoint_;
  unsigned db_;
  Clock::duration timeout_;
  std::uint64_t id_;  // keys the thread-local pools (never reused, unlike an address)
};

}  // namespace sluice::idempotency
