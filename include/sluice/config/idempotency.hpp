#pragma once
// [upstreams.NAME.idempotency]: what the loader reads (defaults here), what the guard obeys
// (docs/idempotency.md). In config/, the layer below idempotency/, because Config holds it; the
// namespace stays idempotency's (docs/architecture.md, Layers).
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::idempotency {

enum class Mode : std::uint8_t { off, collapse, replay };
enum class OnStoreError : std::uint8_t { forward, reject };

struct Config {
  Mode mode = Mode::off;
  // The key's request header; "" = the retry section's idempotency_header.
  std::string header;
  std::chrono::milliseconds replay_window{std::chrono::hours(24)};
  std::uint64_t max_stored_body = 64 * 1024;
  // Status classes whose answers are kept ("2xx", "4xx"), as a bit per class (1 << (status/100)).
  // 5xx and 429 are not kept by default: the client may retry them.
  std::vector<std::string> store_statuses{"2xx", "4xx"};
  unsigned store_classes = (1u << 2) | (1u << 4);
  std::vector<unsigned> store_codes;  // exact codes listed ("429")
  // What scopes the key: "header:NAME" or "client_ip"; their values are hashed with the key.
  std::vector<std::string> scope{"header:Authorization"};
  std::chrono::milliseconds wait{std::chrono::seconds(30)};
  std::string store = "memory";  // "memory" | "redis://HOST:PORT/DB"
  std::uint64_t memory_limit = 64 * 1024 * 1024;
  OnStoreError on_store_error = OnStoreError::forward;
  std::chrono::milliseconds store_timeout{std::chrono::milliseconds(250)};

  // Whether a status is kept (store_statuses); 429 never is unless listed as "429".
  bool stores_status(unsigned status) const noexcept;
};

// "redis://HOST:PORT/DB" split; nullopt-like `ok = false` with `why` for a bad URL.
struct RedisAddress {
  bool ok = false;
  std::string host;
  std::uint16_t port = 6379;
  unsigned db = 0;
  std::string why;
};
RedisAddress parse_redis_url(const std::string& url);

}  // namespace sluice::idempotency
