#pragma once
// The in-process store: one per upstream, shared by every worker. Bounded by bytes (keys, values
// and a fixed per-entry overhead); when full, the oldest entries go first (LRU by age of
// insertion), and each such eviction is counted. Expired entries are dropped when met.
//
// Thread-safe: one mutex, taken only by requests that carry a key (a request without one never
// reaches the store). Times come from the Clock, so the unit tests drive expiry by hand.
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "sluice/idempotency/store.hpp"

namespace sluice::idempotency {

class MemoryStore final : public Store {
public:
  // Bytes accounted per entry beyond its key and value: list and hash nodes, two strings.
  static constexpr std::size_t entry_overhead = 160;

  MemoryStore(const Clock& clock, std::uint64_t limit_bytes) : clock_(clock), limit_(limit_bytes) {}

  // The synchronous operations (what the awaitable ones do).
  Value set_if_absent_now(std::string_view key, std::string_view value, Clock::duration ttl);
  Value get_now(std::string_view key);
  void put_now(std::string_view key, std::string_view value, Clock::duration ttl);
  void remove_if_now(std::string_view key, std::string_view expected);
  void set_limit(std::uint64_t bytes);

  boost::asio::awaitable<boost::system::result<Value>> set_if_absent(
      unsigned worker, std::string_view key, std::string_view value, Clock::duration ttl) override;
  boost::asio::awaitable<boost::system::result<Value>> get(unsigned worker,
                                                           std::string_view key) override;
  boost::asio::awaitable<boost::system::error_code> put(unsigned worker, std::string_view key,
                                                        std::string_view value,
                                                        Clock::duration ttl) override;
  boost::asio::awaitable<boost::system::error_code> remove_if(unsigned worker, std::string_view key,
                                                              std::string_view expected) override;
  bool synchronous() const noexcept override { return true; }
  StoreStats stats() const override;
  std::string_view kind() const noexcept override { return "memory"; }

private:
  struct Item {
    std::string key;
    std::string value;
    Clock::time_point expires;
  };
  using Order = std::list<Item>;  // newest first

  // With mutex_ held: the live item at `key`, dropping it when expired.
  Order::iterator find_live(std::string_view key, Clock::time_point now);
  void erase(Order::iterator it);
  void insert(std::string_view key, std::string_view value, Clock::time_point expires);
  void evict_to_limit();
  static std::size_t cost(const Item& item) noexcept {
    return item.key.size() + item.value.size() + entry_overhead;
  }

  const Clock& clock_;
  mutable std::mutex mutex_;
  std::uint64_t limit_;
  std::uint64_t bytes_ = 0;
  std::uint64_t evictions_ = 0;
  Order order_;
  std::unordered_map<std::string_view, Order::iterator> index_;  // views into order_'s keys
};

}  // namespace sluice::idempotency
