#pragma once
// What a store keeps under a key, as one byte string (the same in memory and in Redis):
//   'P' fingerprint token            a request is in flight (the claim)
//   'S' fingerprint status fields body   its answer, kept for replay
//   'N' fingerprint status           it was executed, but its answer was too large to keep
// `fields` are the answer's header lines ("Name: value\r\n"...) without framing or hop-by-hop
// fields: a replay frames the body itself.
#include <optional>
#include <string>
#include <string_view>

#include "sluice/idempotency/fingerprint.hpp"

namespace sluice::idempotency {

enum class State : char { pending = 'P', stored = 'S', not_stored = 'N' };

struct Entry {
  State state = State::pending;
  Digest fingerprint{};
  std::string_view token;   // pending: who holds the claim
  unsigned status = 0;      // stored, not_stored
  std::string_view fields;  // stored
  std::string_view body;    // stored
};

std::string encode_pending(const Digest& fp, std::string_view token);
std::string encode_stored(const Digest& fp, unsigned status, std::string_view fields,
                          std::string_view body);
std::string encode_not_stored(const Digest& fp, unsigned status);
// Views into `value`; nullopt when it is not a record (another program's key, a truncation).
std::optional<Entry> decode(std::string_view value);

}  // namespace sluice::idempotency
