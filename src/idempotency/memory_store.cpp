#include "sluice/idempotency/memory_store.hpp"

namespace sluice::idempotency {

namespace net = boost::asio;
using boost::system::error_code;
using boost::system::result;

MemoryStore::Order::iterator MemoryStore::find_live(std::string_view key, Clock::time_point now) {
  const auto found = index_.find(key);
  if (found == index_.end()) return order_.end();
  if (found->second->expires <= now) {
    erase(found->second);
    return order_.end();
  }
  return found->second;
}

void MemoryStore::erase(Order::iterator it) {
  bytes_ -= cost(*it);
  index_.erase(std::string_view(it->key));
  order_.erase(it);
}

void MemoryStore::insert(std::string_view key, std::string_view value, Clock::time_point expires) {
  order_.push_front(Item{std::string(key), std::string(value), expires});
  index_.emplace(std::string_view(order_.front().key), order_.begin());
  bytes_ += cost(order_.front());
  evict_to_limit();
}

// The oldest entries go first; the newest always stays, even alone over the limit (a limit
// below one answer is a configuration the loader refuses).
void MemoryStore::evict_to_limit() {
  const auto now = clock_.now();
  while (bytes_ > limit_ && order_.size() > 1) {
    const auto oldest = std::prev(order_.end());
    if (oldest->expires > now) ++evictions_;  // an expired entry leaving is no eviction
    erase(oldest);
  }
}

Store::Value MemoryStore::set_if_absent_now(std::string_view key, std::string_view value,
                                            Clock::duration ttl) {
  const std::lock_guard lock(mutex_);
  const auto now = clock_.now();
  if (const auto it = find_live(key, now); it != order_.end()) return it->value;
  insert(key, value, now + ttl);
  return std::nullopt;
}

Store::Value MemoryStore::get_now(std::string_view key) {
  const std::lock_guard lock(mutex_);
  if (const auto it = find_live(key, clock_.now()); it != order_.end()) return it->value;
  return std::nullopt;
}

void MemoryStore::put_now(std::string_view key, std::string_view value, Clock::duration ttl) {
  const std::lock_guard lock(mutex_);
  const auto now = clock_.now();
  if (const auto found = index_.find(key); found != index_.end()) erase(found->second);
  insert(key, value, now + ttl);
}

void MemoryStore::remove_if_now(std::string_view key, std::string_view expected) {
  const std::lock_guard lock(mutex_);
  if (const auto it = find_live(key, clock_.now()); it != order_.end() && it->value == expected)
    erase(it);
}

void MemoryStore::set_limit(std::uint64_t bytes) {
  const std::lock_guard lock(mutex_);
  limit_ = bytes;
  evict_to_limit();
}

StoreStats MemoryStore::stats() const {
  const std::lock_guard lock(mutex_);
  return {order_.size(), bytes_, evictions_, true};
}

net::awaitable<result<Store::Value>> MemoryStore::set_if_absent(unsigned, std::string_view key,
                                                                std::string_view value,
                                                                Clock::duration ttl) {
  co_return set_if_absent_now(key, value, ttl);
}

net::awaitable<result<Store::Value>> MemoryStore::get(unsigned, std::string_view key) {
  co_return get_now(key);
}

net::awaitable<error_code> MemoryStore::put(unsigned, std::string_view key, std::string_view value,
                                            Clock::duration ttl) {
  put_now(key, value, ttl);
  co_return error_code{};
}

net::awaitable<error_code> MemoryStore::remove_if(unsigned, std::string_view key,
                                                  std::string_view expected) {
  remove_if_now(key, expected);
  co_return error_code{};
}

}  // namespace sluice::idempotency
