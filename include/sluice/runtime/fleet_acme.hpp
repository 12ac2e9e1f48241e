#pragma once
// ACME certificates in a fleet ([fleet] with acme tables, docs/tls.md): one instance orders each
// certificate, the others take it from Redis.
//
// Every second, per certificate (by its first domain): the hash sluice:fleet:acme:NAME holds the
// chain and its private key (fields cert, key). A certificate there that expires later than the
// one this instance serves is written to its storage and swapped in; one this instance has that
// expires later than Redis's (it ordered it) is written there. While a certificate is missing or
// due for renewal, the instance holding the lease sluice:fleet:acme:lease:NAME (SET NX PX
// lease_ttl, renewed every second) is the one whose ACME client may order it; the lease is
// dropped once the certificate is fresh. The holder's pending challenges are written to
// sluice:fleet:acme:challenges:NAME and every other instance answers them too (the ACME client
// waits a few seconds before asking the CA to validate). Without Redis every instance orders on
// its own, as without a fleet.
//
// Runs on the control thread's io_context with its own connection; may_order() is asked from
// the ACME client's thread.
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "sluice/config/config.hpp"
#include "sluice/runtime/fleet_redis.hpp"
#include "sluice/tls/acme_slot.hpp"

namespace sluice {

class FleetAcme {
public:
  FleetAcme(boost::asio::io_context& io, const config::FleetSection& config, std::string name,
            std::vector<std::shared_ptr<tls::acme::Slot>> slots);
  FleetAcme(const FleetAcme&) = delete;
  FleetAcme& operator=(const FleetAcme&) = delete;

  void start();
  void stop();
  // Any thread: whether this instance's ACME client may order `name` now (it holds the lease, or
  // Redis does not answer). False until the first sync.
  bool may_order(const std::string& name) const;

private:
  boost::asio::awaitable<void> run();
  boost::asio::awaitable<boost::system::error_code> sync(tls::acme::Slot& slot, Clock::time_point deadline);
  boost::asio::awaitable<boost::system::error_code> publish(tls::acme::Slot& slot, const std::string& key,
                                                            Clock::time_point deadline);
  boost::asio::awaitable<boost::system::error_code> share_challenges(tls::acme::Slot& slot, Clock::time_point deadline);
  boost::asio::awaitable<boost::system::error_code> keep_lease(const std::string& name, bool needed,
                                                               Clock::time_point deadline);
  void lost(boost::system::error_code ec);

  const config::FleetSection config_;
  std::string name_;
  std::vector<std::shared_ptr<tls::acme::Slot>> slots_;
  fleet::RedisLink link_;
  boost::asio::steady_timer timer_;
  std::mt19937_64 random_{std::random_device{}()};
  bool stopped_ = false;
  bool reported_down_ = false;
  mutable std::mutex mutex_;  // what may_order reads
  bool settled_ = false;
  bool up_ = false;
  std::set<std::string> leases_;
  std::set<std::string> shared_;  // certificates whose pending challenges are in Redis (control thread)
};

}  // namespace sluice
