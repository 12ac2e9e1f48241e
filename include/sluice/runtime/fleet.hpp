#pragma once
// Fleet mode ([fleet], docs/fleet.md): the instances behind one L4 balancer share their drains
// and their health probes (one prober per server, chosen by a lease) through Redis. A drain or undrain through any instance's admin API is written to the drains
// hash and published on its channel; every instance reads the hash when a message arrives and
// every sync period (250 ms), and applies it as if its own API had been asked. Each instance also
// writes a report, refreshed every sync with a TTL of lease_ttl: the servers it holds draining
// and its requests in flight there, which `drain --wait` sums over the fleet.
//
// Runs on the control thread's io_context (two connections: commands, and a subscriber); no
// worker ever waits on Redis. When Redis is gone or slow (an operation past its 1 s deadline),
// the instance keeps the drains it knew, takes drains through its own API as before, logs once
// and counts it; it reconnects with back-off (reconnect_delay) and resyncs: changes made here
// meanwhile are written first, then the hash is read. Control thread only.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/object.hpp>

#include "sluice/config/config.hpp"
#include "sluice/health/server_health.hpp"
#include "sluice/runtime/fleet_ejections.hpp"
#include "sluice/runtime/fleet_redis.hpp"
#include "sluice/runtime/fleet_state.hpp"
#include "sluice/runtime/snapshot.hpp"

namespace sluice {

class Fleet {
public:
  // The servers now (the current snapshot), and how a drain from the fleet is applied to one.
  using SnapshotSource = std::function<std::shared_ptr<const Snapshot>()>;
  using ApplyDrain = std::function<void(const std::string& upstream, Endpoint& endpoint, bool drain)>;
  // A probe verdict from the instance that holds the server's lease, for this instance's prober.
  using ApplyVerdict = std::function<void(const fleet::Verdict& verdict)>;

  static constexpr std::chrono::milliseconds sync_period{250};
  static constexpr std::chrono::milliseconds op_timeout{1000};

  Fleet(boost::asio::io_context& io, const config::FleetSection& config, std::string name,
        SnapshotSource snapshot, ApplyDrain apply, ApplyVerdict verdict);
  ~Fleet();
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  void start();
  void stop();  // closes both connections; the loops end

  // The first sync is over: done, or failed (the instance then starts with its own drains).
  bool settled() const { return settled_; }
  bool redis_up() const { return up_; }
  std::uint64_t redis_lost() const { return lost_; }
  const std::string& name() const { return name_; }

  // A drain or undrain made through this instance's admin API: written to Redis at once, or
  // when it is back.
  void drained_here(const std::string& upstream, const std::string& server, bool drain);
  // `server`'s requests in flight over the fleet, this instance's `local` count included.
  fleet::FleetInFlight in_flight(const std::string& upstream, const std::string& server,
                                 std::int64_t local) const;
  // Probe leases: whether this instance probes the server now (it holds the lease, or Redis is
  // gone and every instance probes on its own), and a verdict of its own prober, published when
  // it holds the lease.
  bool may_probe(const std::string& upstream, const std::string& server) const;
  void probed(const std::string& upstream, const std::string& server, const health::ProbeResult& result);
  // GET /api/fleet: this instance, Redis, the drains and the other instances' reports.
  boost::json::object status() const;

  // Shared ejections (share_ejections, fleet_ejections.cpp). The health tick calls
  // notice_ejections(): this instance's new passive ejections go to the fleet at once.
  void notice_ejections();
  std::uint64_t ejections_published() const { return ejections_.published; }
  std::uint64_t ejections_applied() const { return ejections_.applied_here; }
  bool shares_ejections() const { return config_.share_ejections; }

private:
  boost::asio::awaitable<void> run_sync();
  boost::asio::awaitable<void> run_subscriber();
  boost::asio::awaitable<boost::system::error_code> sync_once();
  boost::asio::awaitable<boost::system::error_code> seed(Clock::time_point deadline);
  boost::asio::awaitable<boost::system::error_code> publish_changes(Clock::time_point deadline);
  boost::asio::awaitable<boost::system::error_code> read_drains(Clock::time_point deadline);
  boost::asio::awaitable<boost::system::error_code> exchange_reports(Clock::time_point deadline);
  boost::asio::awaitable<boost::system::error_code> keep_leases(Clock::time_point deadline);
  boost::asio::awaitable<boost::system::error_code> keep_lease(const std::string& field, std::size_t share,
                                                               Clock::time_point deadline);
  boost::asio::awaitable<boost::system::error_code> publish_verdicts(Clock::time_point deadline);
  void on_message(const fleet::Reply& message);
  boost::asio::awaitable<boost::system::error_code> share_ejections(Clock::time_point deadline);
  boost::asio::awaitable<boost::system::error_code> read_ejections(Clock::time_point deadline);
  void apply_ejection(const fleet::SharedEjection& e);
  void on_ejection_message(std::string_view text);
  boost::json::array ejections_json() const;
  std::set<std::string> probed_servers() const;
  boost::asio::awaitable<void> pause(boost::asio::steady_timer& timer, std::chrono::milliseconds d);
  boost::asio::awaitable<void> until_next_sync();
  void apply(const std::set<std::string>& drained);
  fleet::Report own_report() const;
  const std::string& config_version() const;  // the serving config's fingerprint
  void wake();
  void lost(boost::system::error_code ec);
  void back();
  double jitter() { return std::uniform_real_distribution<double>(0.0, 1.0)(random_); }

  const config::FleetSection config_;
  std::string name_;
  SnapshotSource snapshot_;
  ApplyDrain apply_;
  ApplyVerdict verdict_;
  fleet::RedisLink link_;        // commands
  fleet::RedisLink subscriber_;  // SUBSCRIBE drains_channel
  boost::asio::steady_timer tick_;      // the sync period; cut short by wake()
  boost::asio::steady_timer backoff_;   // reconnect delays of the sync loop
  boost::asio::steady_timer sub_backoff_;
  std::mt19937_64 random_{std::random_device{}()};
  bool stopped_ = false;
  bool settled_ = false;
  bool up_ = false;
  bool reported_down_ = false;  // "Redis unreachable" logged, not yet "back"
  bool seed_check_ = true;      // after each connect: is the hash there at all?
  bool wake_pending_ = false;
  std::uint64_t lost_ = 0;
  // Drains changed here, not yet written to Redis: field -> drained.
  std::map<std::string, bool> unpublished_;
  std::set<std::string> remote_;                      // the drains hash as last read
  std::map<std::string, fleet::Report> others_;       // live instances' reports, by name
  std::map<std::string, Clock::time_point> leases_;  // held: field -> when to renew
  std::vector<std::string> verdicts_;                // this prober's, to publish
  fleet::EjectionShare ejections_;                   // share_ejections
  mutable std::shared_ptr<const config::Config> fingerprinted_;  // the config of fingerprint_
  mutable std::string fingerprint_;
};

// [fleet] name's default: the host name and the first listen address ("lb-1/0.0.0.0:8080").
std::string default_fleet_name(const config::Config& config);

}  // namespace sluice
