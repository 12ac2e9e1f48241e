#pragma once
// [upstreams.NAME.idempotency]: what the loader reads (defaults here), what the guard obeys
// (docs/idempotency.md). In config/, the layer below idempotency/, because Config holds it; the
// namespace stays idempotency's (docs/architecture.md, Layers).
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sluice::idempotency {

// "redis://HOST:PORT/DB" split; nullopt-like `ok = false` with `why` for a bad URL.
struct RedisAddress {
  bool ok = false;
  std::string host;
  std::uint16_t port = 6379;
  unsigned db = 0;
  std::string why;
};
RedisAddress parse_redis_url(const std::string& url);

// One part of `scope`: the client's address, or a request header's value.
struct ScopePart {
  enum class Kind : std::uint8_t { client_ip, header };
  Kind kind = Kind::header;
  std::string header;  // with Kind::header
  bool operator==(const ScopePart&) const = default;
};

enum class Mode : std::uint8_t { off, collapse, replay };
enum class OnStoreError : std::uint8_t { forward, reject };

struct Config {
  Mode mode = Mode::off;
  // The key's request header; "" = the retry section's idempotency_header.
  std::string header;
  std::chrono::milliseconds replay_window{std::chrono::hours(24)};
  std::uint64_t max_stored_body = 64 * 1024;
  // store_statuses: status classes whose answers are kept ("2xx", "4xx"), as a bit per class
  // (1 << (status/100)), and exact codes ("409"). 5xx and 429 are not kept by default: the
  // client may retry them.
  unsigned store_classes = (1u << 2) | (1u << 4);
  std::vector<unsigned> store_codes;
  // What scopes the key ("header:NAME", "client_ip"); their values are hashed with the key.
  std::vector<ScopePart> scope{{ScopePart::Kind::header, "Authorization"}};
  std::chrono::milliseconds wait{std::chrono::seconds(30)};
  std::string store = "memory";  // as written: "memory" | "redis://HOST:PORT/DB"
  std::optional<RedisAddress> redis;  // the parsed Redis URL; nullopt = the memory store
  std::uint64_t memory_limit = 64 * 1024 * 1024;
  OnStoreError on_store_error = OnStoreError::forward;
  std::chrono::milliseconds store_timeout{std::chrono::milliseconds(250)};

  // Whether a status is kept (store_statuses); 429 never is unless listed as "429".
  bool stores_status(unsigned status) const noexcept;
};


}  // namespace sluice::idempotency
