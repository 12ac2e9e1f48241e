#pragma once
// One DNS source of servers, as a pure state machine (no I/O, time from a Clock): a `resolve`
// server's name or an upstream's `discover` SRV name. It turns answers into the servers the next
// snapshot gets, decides when to ask again (the records' TTL clamped to [dns] min_ttl..max_ttl,
// or resolve_interval), and keeps the last good set through failures until stale_ttl.
// Owned and driven by Discovery on the control thread.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "sluice/config/config.hpp"
#include "sluice/core/clock.hpp"

namespace sluice::discovery {

// One address an answer gave.
struct Record {
  std::string target;  // the name the address belongs to: the `resolve` host, or the SRV target
  boost::asio::ip::address ip;
  std::uint16_t port = 0;
  std::uint16_t priority = 0;  // SRV (RFC 2782): lowest first
  std::uint16_t weight = 0;    // SRV
};

enum class Outcome { ok, empty, failed };
inline constexpr std::size_t outcome_count = static_cast<std::size_t>(Outcome::failed) + 1;

struct Answer {
  Outcome outcome = Outcome::failed;
  std::vector<Record> records;
  std::chrono::seconds ttl{0};  // the smallest TTL of the records used
  std::string error;            // failed: what the resolver said ("Timeout while contacting DNS servers")
};

// What an applied answer did to the membership.
struct Change {
  std::vector<std::string> added;    // identities
  std::vector<std::string> removed;  // identities
  bool reweighted = false;           // a survivor's SRV weight or priority changed
  bool empty() const { return added.empty() && removed.empty() && !reweighted; }
};

class Source {
public:
  enum class Kind { name, srv };

  // `server`: the `resolve` server (kind name), or the upstream's template for its SRV servers
  // (tls, from the upstream). `interval`: resolve_interval, 0 = the TTL.
  Source(Kind kind, std::string upstream, std::string name, config::ServerConfig server,
         config::Duration interval);

  Kind kind() const noexcept { return kind_; }
  const std::string& upstream() const noexcept { return upstream_; }
  const std::string& name() const noexcept { return name_; }
  // Which source this is across reloads: same upstream, kind and name (and port for kind name).
  std::string key() const;
  // A reload: the server's other settings (weight, max_conns, ...) and the interval may change.
  void update(config::ServerConfig server, config::Duration interval);
  const config::ServerConfig& server() const noexcept { return server_; }
  config::Duration interval() const noexcept { return interval_; }

  // Applies one resolution at `now`; returns who came and went.
  Change apply(const Answer& answer, const config::DnsSection& dns, Clock::time_point now);

  // When to resolve again.
  Clock::time_point next_query() const noexcept { return next_; }
  bool answered() const noexcept { return answered_; }
  // The servers this source gives the snapshot, sorted by identity.
  const std::vector<config::ServerConfig>& servers() const noexcept { return servers_; }
  // Set while the last resolution failed and the servers are the last good set.
  std::optional<Clock::time_point> stale_since() const noexcept { return stale_since_; }
  const std::string& last_error() const noexcept { return last_error_; }
  std::chrono::seconds ttl() const noexcept { return ttl_; }
  Clock::time_point resolved_at() const noexcept { return resolved_at_; }
  std::uint64_t resolutions(Outcome o) const noexcept { return counts_[static_cast<int>(o)]; }
  std::uint64_t changes() const noexcept { return changes_; }

  // "app.internal@10.0.0.5:8080": the address, never the position in the answer, so that two
  // instances that saw the answer in different orders agree (consistent hashing keys on it).
  static std::string identity(std::string_view prefix, const boost::asio::ip::address& ip,
                              std::uint16_t port);

private:
  std::vector<config::ServerConfig> servers_of(const std::vector<Record>& records) const;
  Change replace(std::vector<config::ServerConfig> servers);
  Clock::duration retry_after(const config::DnsSection& dns) const;

  Kind kind_;
  std::string upstream_;
  std::string name_;
  config::ServerConfig server_;
  config::Duration interval_;
  std::vector<config::ServerConfig> servers_;
  Clock::time_point next_{};
  Clock::time_point resolved_at_{};
  std::optional<Clock::time_point> stale_since_;
  std::string last_error_;
  std::chrono::seconds ttl_{0};
  bool answered_ = false;
  std::uint64_t counts_[outcome_count] = {};
  std::uint64_t changes_ = 0;
};

}  // namespace sluice::discovery
