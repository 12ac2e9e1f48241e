#pragma once
// Shared ejections in fleet mode ([fleet] share_ejections, docs/fleet.md): the Redis keys, the
// record of one ejection, and what an instance keeps about them. The I/O is Fleet's
// (fleet_ejections.cpp), on the control thread.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::fleet {

// The ejections in place: a hash of "UPSTREAM/SERVER" -> the record below. Each record is also
// published on the channel when it is written, so that the others apply it at once; the hash is
// for an instance that starts or reconnects. An entry past its end is removed by whoever reads it.
inline constexpr std::string_view ejections_key = "sluice:fleet:ejections";
inline constexpr std::string_view ejections_channel = "sluice:fleet:ejections";

// One passive ejection: who made it, until when (Unix ms, by the clock of the instance that made
// it: the instances' clocks must agree, as NTP keeps them) and why, as a JSON object
// {"from": NAME, "upstream": U, "server": S, "until_ms": MS, "reason": TEXT}.
struct SharedEjection {
  std::string from;
  std::string upstream;
  std::string server;
  std::int64_t until_ms = 0;
  std::string reason;
};
std::string encode_ejection(const SharedEjection& e);
std::optional<SharedEjection> decode_ejection(std::string_view text);

// Milliseconds since the Unix epoch, by this host's clock.
std::int64_t unix_ms();

// What one instance keeps: per server ("UPSTREAM/SERVER"), the count of its own ejections it has
// seen (a higher count is a new ejection to publish), its ejections not yet written, the hash as
// last read, and the end of the last record it applied (a record is applied once).
struct EjectionShare {
  std::map<std::string, std::uint64_t> seen;
  std::map<std::string, SharedEjection> pending;
  std::map<std::string, SharedEjection> known;
  std::map<std::string, std::int64_t> applied;
  std::uint64_t published = 0;     // this instance's ejections written to the fleet
  std::uint64_t applied_here = 0;  // other instances' ejections applied here

  // Whether a record read or received now (`now_ms`) is to be applied by `self`: another's, not
  // over, and not already applied. Remembers it when so.
  bool take(const SharedEjection& e, std::string_view self, std::int64_t now_ms);
};

}  // namespace sluice::fleet
