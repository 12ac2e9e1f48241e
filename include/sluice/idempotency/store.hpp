#pragma once
// Where claims and answers live: a key-value store with expiry, asked by the guard only for
// requests that carry a key. Two kinds: MemoryStore (one process, shared by its workers) and
// RedisStore (a fleet of sluice instances). Operations run on the calling worker's executor;
// `worker` picks that worker's share of the store's resources (Redis connections).
// A store error (unreachable, timeout, bad reply) is a value: the guard decides what it means.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include "sluice/core/clock.hpp"

namespace sluice::idempotency {

struct StoreStats {
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;
  std::uint64_t evictions = 0;
  bool known = true;  // false: the numbers live elsewhere (Redis)
};

class Store {
public:
  using Value = std::optional<std::string>;  // nullopt: no such key
  virtual ~Store() = default;

  // Sets `key` to `value` for `ttl` unless it holds a value: then returns that value and sets
  // nothing. nullopt: it was set (the caller holds the claim).
  virtual boost::asio::awaitable<boost::system::result<Value>> set_if_absent(
      unsigned worker, std::string_view key, std::string_view value, Clock::duration ttl) = 0;
  virtual boost::asio::awaitable<boost::system::result<Value>> get(unsigned worker,
                                                                   std::string_view key) = 0;
  virtual boost::asio::awaitable<boost::system::error_code> put(unsigned worker,
                                                                std::string_view key,
                                                                std::string_view value,
                                                                Clock::duration ttl) = 0;
  // Deletes `key` if it still holds `expected` (a claim is released only by its holder).
  virtual boost::asio::awaitable<boost::system::error_code> remove_if(unsigned worker,
                                                                      std::string_view key,
                                                                      std::string_view expected) = 0;
  // Whether set/put/remove complete without suspending (memory): the guard then finishes an
  // exchange in line instead of spawning a coroutine for it.
  virtual bool synchronous() const noexcept { return false; }
  virtual StoreStats stats() const = 0;
  virtual std::string_view kind() const noexcept = 0;
};

}  // namespace sluice::idempotency
