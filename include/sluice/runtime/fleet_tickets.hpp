#pragma once
// The fleet's session ticket keys ([fleet] with TLS listeners, docs/fleet.md): every instance
// encrypts tickets with the same key, so that a client resumes its session on whichever instance
// the balancer sends it to, after a reload and after an upgrade.
//
// The keys are one Redis value, a ring: the next key (decrypt only), the current one (encrypts)
// and the previous one (decrypt only), with a generation and the time of the last rotation. When
// a rotation is due (ticket_key_rotation after the last), the instance that takes the lease
// shifts the ring: the next key becomes current, the current one previous, a new next key is
// made, the oldest dropped. Because every instance loads a key one rotation before it encrypts,
// a ticket from any instance decrypts on every other; a ticket resumes for at least one rotation
// period and never beyond two.
//
// Runs on the control thread's io_context with its own connection; workers read the keys through
// tls::TicketKeys (an atomic pointer) and never wait on Redis. Without Redis the instance keeps
// the keys it has (its own random one until Redis first answers) and keeps serving.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/object.hpp>

#include "sluice/config/config.hpp"
#include "sluice/runtime/fleet_redis.hpp"
#include "sluice/tls/ticket_keys.hpp"

namespace sluice {

namespace fleet {

inline constexpr std::string_view ticket_keys_key = "sluice:fleet:ticket_keys";
inline constexpr std::string_view ticket_keys_lease = "sluice:fleet:ticket_keys:lease";
inline constexpr std::size_t ticket_ring_size = 3;  // next, current, previous

struct TicketKeyRing {
  std::uint64_t generation = 0;
  std::int64_t rotated_ms = 0;        // Unix time of the last rotation, in ms (the rotator's clock)
  std::vector<tls::TicketKey> keys;  // next, current, previous (fewer right after the first)
  bool operator==(const TicketKeyRing&) const = default;
};

// The Redis value: generation and rotated_ms (8 bytes each, big-endian), then the keys (80
// bytes each). nullopt when the bytes are not such a value.
std::string encode_ring(const TicketKeyRing& ring);
std::optional<TicketKeyRing> decode_ring(std::string_view bytes);
// What the lease holder writes, given what Redis holds and what this instance holds: a first
// ring, the held ring again (Redis lost it), the stored one rotated, or nothing to do.
std::optional<TicketKeyRing> next_ring(const std::optional<TicketKeyRing>& stored,
                                       const std::optional<TicketKeyRing>& held, std::int64_t now_ms,
                                       std::chrono::milliseconds rotation);
// The keys in the order a listener uses them: the current one first (it encrypts).
std::vector<tls::TicketKey> listener_order(const TicketKeyRing& ring);

}  // namespace fleet

class FleetTicketKeys {
public:
  FleetTicketKeys(boost::asio::io_context& io, const config::FleetSection& config, std::string name);
  FleetTicketKeys(const FleetTicketKeys&) = delete;
  FleetTicketKeys& operator=(const FleetTicketKeys&) = delete;

  // What the listeners without session_ticket_key_file are given.
  const std::shared_ptr<tls::TicketKeys>& keys() const { return keys_; }
  void start();
  void stop();
  // The first sync is over: the fleet's keys loaded, or Redis did not answer.
  bool settled() const { return settled_; }
  // GET /api/fleet's ticket_keys: the generation loaded (0: this instance's own key), when the
  // ring was last rotated, and whether Redis answers.
  boost::json::object status() const;

private:
  boost::asio::awaitable<void> run();
  boost::asio::awaitable<boost::system::error_code> sync_once();
  boost::asio::awaitable<boost::system::result<std::optional<fleet::TicketKeyRing>>> read_ring(
      Clock::time_point deadline);
  boost::asio::awaitable<boost::system::result<std::optional<fleet::TicketKeyRing>>> take_turn(
      Clock::time_point deadline);
  std::chrono::milliseconds poll_period() const;
  void adopt(const fleet::TicketKeyRing& ring);
  void lost(boost::system::error_code ec);

  const config::FleetSection config_;
  std::string name_;
  std::shared_ptr<tls::TicketKeys> keys_ = std::make_shared<tls::TicketKeys>();
  fleet::RedisLink link_;
  boost::asio::steady_timer timer_;
  std::mt19937_64 random_{std::random_device{}()};
  std::optional<fleet::TicketKeyRing> held_;  // the ring loaded; nullopt = the own random key
  bool stopped_ = false;
  bool settled_ = false;
  bool up_ = false;
  bool reported_down_ = false;
};

}  // namespace sluice
