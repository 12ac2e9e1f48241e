#pragma once
// The rules of fleet mode (runtime/fleet.hpp) as pure functions, so that they are tested without
// Redis: the Redis keys, what a sync leaves drained, the in-flight reports `drain --wait` sums,
// and the reconnect back-off.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

namespace sluice::fleet {

// Every key in the fleet's Redis database starts with this.
inline constexpr std::string_view key_prefix = "sluice:fleet:";
// The drains: a hash of "UPSTREAM/SERVER" -> the instance that set it.
inline constexpr std::string_view drains_key = "sluice:fleet:drains";
// Published with the field after each drain change: the others read the hash at once.
inline constexpr std::string_view drains_channel = "sluice:fleet:drains";
// Set once the drains hash holds the fleet's state: when it is missing, Redis lost its data (a
// restart without persistence) and each instance puts back the drains it holds.
inline constexpr std::string_view seeded_key = "sluice:fleet:seeded";
// The instances' names (a set) and each one's report ("sluice:fleet:instance:NAME", with a TTL).
inline constexpr std::string_view instances_key = "sluice:fleet:instances";
std::string instance_key(std::string_view name);

// A server's field in the drains hash and the reports.
std::string server_field(std::string_view upstream, std::string_view server);

// The drains this instance should hold after reading the hash: what Redis holds, with this
// instance's changes not yet written there on top (they win: they are newer than the read).
std::set<std::string> merged_drains(const std::set<std::string>& remote,
                                    const std::map<std::string, bool>& unpublished);

// One instance's report, refreshed every sync, as a JSON object
// {"config": FINGERPRINT, "at_ms": UNIX_MS, "draining": {FIELD: IN_FLIGHT, ...},
// "probes": [FIELD, ...], "out": {FIELD: STATE, ...}}: the config it serves, when it wrote the
// report (its own clock), each server it holds draining with its requests in flight there, the
// servers whose probe lease it holds, and the servers it holds out of service by its health
// verdicts ("down" or "ejected"). A document that is not of that shape reads as an empty report.
struct Report {
  std::string config;
  std::int64_t at_ms = 0;
  std::map<std::string, std::int64_t> draining;  // field -> in flight
  std::vector<std::string> probes;
  std::map<std::string, std::string> out;  // field -> "down" | "ejected"
};
std::string encode_report(const Report& report);
Report decode_report(std::string_view text);

// A server's requests in flight over the fleet. `unconfirmed`: live instances whose report does
// not show it draining yet (they have not applied the drain, so their count is not final).
struct FleetInFlight {
  std::int64_t in_flight = 0;
  unsigned unconfirmed = 0;
};
FleetInFlight sum_in_flight(std::string_view field, std::int64_t local,
                            const std::vector<Report>& others);

// The servers the instances' verdicts disagree on: held out of service by one instance (its
// report's `out`) and not by another, or not in the same way. Each with every instance's view
// ("in" where the instance serves it), by instance name, `self` being `mine`.
using Disagreements = std::map<std::string, std::map<std::string, std::string>>;
Disagreements verdict_disagreements(const std::string& self, const Report& mine,
                                    const std::map<std::string, Report>& others);

// Probe leases: "sluice:fleet:lease:FIELD" holds the name of the one instance that probes the
// server; its verdicts go out on verdicts_channel and every other instance applies them.
std::string lease_key(std::string_view field);
inline constexpr std::string_view verdicts_channel = "sluice:fleet:verdicts";
// How many leases one of `instances` live instances takes at most, so that they spread: an
// instance holding more releases the excess, and the others take it.
std::size_t fair_share(std::size_t servers, std::size_t instances);
// A lease is renewed after a third of its TTL, less up to a tenth of it (`jitter` in [0, 1)),
// so that the renewals of many leases do not fall together.
std::chrono::milliseconds renew_after(std::chrono::milliseconds ttl, double jitter);

// One probe verdict as published by the lease holder.
struct Verdict {
  std::string from;  // the instance that probed
  std::string upstream;
  std::string server;
  bool passed = false;
  std::string detail;
  std::int64_t latency_us = 0;
};
// A record's string field: false when it is missing or not a string.
bool string_field(const boost::json::object& record, std::string_view key, std::string& out);
std::string encode_verdict(const Verdict& v);
std::optional<Verdict> decode_verdict(std::string_view text);

// The wait before the next connection attempt after `failures` failed ones in a row: 100 ms
// doubling up to 5 s, times a jitter factor in [0.5, 1] (`jitter` in [0, 1)), so that instances
// that lost Redis together do not all come back in the same millisecond.
std::chrono::milliseconds reconnect_delay(unsigned failures, double jitter);

}  // namespace sluice::fleet
