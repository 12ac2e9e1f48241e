// The fleet's session ticket keys (fleet_tickets.hpp): the ring in Redis, its rotation under a
// lease, and the start-up wait that lets the first handshake use the fleet's keys.
#include "sluice/runtime/fleet_tickets.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <array>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "sluice/runtime/control_loop.hpp"
#include "sluice/runtime/fleet.hpp"
#include "sluice/runtime/fleet_state.hpp"
#include "sluice/runtime/fleet_task.hpp"

namespace sluice {

namespace net = boost::asio;
using boost::system::error_code;
using boost::system::result;

namespace fleet {

namespace {

void put_u64(std::string& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::uint64_t get_u64(std::string_view in) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

}  // namespace

std::string encode_ring(const TicketKeyRing& ring) {
  std::string out;
  put_u64(out, ring.generation);
  put_u64(out, static_cast<std::uint64_t>(ring.rotated_ms));
  for (const auto& key : ring.keys) key.append_to(out);
  return out;
}

std::optional<TicketKeyRing> decode_ring(std::string_view bytes) {
  constexpr std::size_t header = 16;
  if (bytes.size() < header + tls::ticket_key_bytes || (bytes.size() - header) % tls::ticket_key_bytes != 0 ||
      bytes.size() > header + ticket_ring_size * tls::ticket_key_bytes)
    return std::nullopt;
  TicketKeyRing ring;
  ring.generation = get_u64(bytes);
  ring.rotated_ms = static_cast<std::int64_t>(get_u64(bytes.substr(8)));
  for (std::size_t at = header; at < bytes.size(); at += tls::ticket_key_bytes)
    ring.keys.push_back(tls::TicketKey::from_bytes(bytes.data() + at));
  return ring;
}

std::optional<TicketKeyRing> next_ring(const std::optional<TicketKeyRing>& stored,
                                       const std::optional<TicketKeyRing>& held, std::int64_t now_ms,
                                       std::chrono::milliseconds rotation) {
  if (!stored) {
    if (held) return held;  // Redis lost the ring: put back the keys the fleet uses
    return TicketKeyRing{1, now_ms, {tls::TicketKey::random(), tls::TicketKey::random()}};
  }
  if (now_ms < stored->rotated_ms + rotation.count()) return std::nullopt;
  TicketKeyRing next{stored->generation + 1, now_ms, {tls::TicketKey::random()}};
  for (const auto& key : stored->keys)
    if (next.keys.size() < ticket_ring_size) next.keys.push_back(key);
  return next;
}

std::vector<tls::TicketKey> listener_order(const TicketKeyRing& ring) {
  auto keys = ring.keys;
  if (keys.size() >= 2) std::swap(keys[0], keys[1]);
  return keys;
}

}  // namespace fleet

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool is_ok(const result<fleet::Reply>& r) { return r && r->type == fleet::Reply::Type::status; }

}  // namespace

FleetTicketKeys::FleetTicketKeys(net::io_context& io, const config::FleetSection& config, std::string name)
    : config_(config), name_(std::move(name)), link_(io.get_executor(), config_), timer_(io) {
  keys_->set({tls::TicketKey::random()});  // until the fleet's keys are loaded
}

void FleetTicketKeys::start() { fleet::spawn_task(timer_.get_executor(), run(), "session ticket keys"); }

void FleetTicketKeys::stop() {
  stopped_ = true;
  timer_.cancel();
  link_.close();
}

// Often enough that every instance loads a new next key well before it encrypts (one rotation
// later); faster while this instance has not loaded the fleet's keys yet.
std::chrono::milliseconds FleetTicketKeys::poll_period() const {
  if (!held_) return std::chrono::milliseconds(100);
  const auto quarter = std::chrono::duration_cast<std::chrono::milliseconds>(config_.ticket_key_rotation) / 4;
  return std::clamp(quarter, std::chrono::milliseconds(100), std::chrono::milliseconds(1000));
}

net::awaitable<void> FleetTicketKeys::run() {
  unsigned failures = 0;
  while (!stopped_) {
    auto wait = poll_period();
    error_code ec;
    if (!link_.is_open()) ec = co_await link_.connect(steady_clock().exact() + Fleet::op_timeout);
    if (!ec) ec = co_await sync_once();
    if (ec) {
      link_.close();
      if (!stopped_) lost(ec);
      wait = fleet::reconnect_delay(++failures, std::uniform_real_distribution<double>(0.0, 1.0)(random_));
    } else {
      failures = 0;
      if (reported_down_)
        spdlog::info("fleet: Redis at {} reachable again; session ticket keys resynced", config_.redis);
      reported_down_ = false;
      up_ = true;
    }
    if (stopped_) break;
    timer_.expires_after(wait);
    co_await timer_.async_wait(nothrow);
  }
}

void FleetTicketKeys::lost(error_code ec) {
  settled_ = true;
  up_ = false;
  if (reported_down_) return;
  reported_down_ = true;
  spdlog::warn("fleet: Redis at {} unreachable ({}); session ticket keys stay as they are (generation {})",
               config_.redis, ec.message(), held_ ? held_->generation : 0);
}

net::awaitable<result<std::optional<fleet::TicketKeyRing>>> FleetTicketKeys::read_ring(Clock::time_point deadline) {
  const std::array<std::string_view, 2> get{"GET", fleet::ticket_keys_key};
  const auto reply = co_await link_.command(get, deadline);
  if (!reply) co_return reply.error();
  if (reply->type != fleet::Reply::Type::string) co_return std::optional<fleet::TicketKeyRing>{};
  auto ring = fleet::decode_ring(reply->str);
  OPENSSL_cleanse(const_cast<char*>(reply->str.data()), reply->str.size());
  co_return ring;  // a value that is not a ring is replaced as if there were none
}

// A rotation is due, or there is no ring: the instance that takes the lease reads the ring again
// (another may have just written it) and writes the next one.
net::awaitable<result<std::optional<fleet::TicketKeyRing>>> FleetTicketKeys::take_turn(Clock::time_point deadline) {
  const auto ttl_ms = std::chrono::duration_cast<std::chrono::milliseconds>(config_.lease_ttl).count();
  const std::string ttl = std::to_string(ttl_ms);
  const std::array<std::string_view, 6> lease{"SET", fleet::ticket_keys_lease, name_, "NX", "PX", ttl};
  const auto taken = co_await link_.command(lease, deadline);
  if (!taken) co_return taken.error();
  auto stored = co_await read_ring(deadline);
  if (!stored || taken->type != fleet::Reply::Type::status) co_return stored;
  const auto rotation = std::chrono::duration_cast<std::chrono::milliseconds>(config_.ticket_key_rotation);
  const auto next = fleet::next_ring(*stored, held_, unix_ms(), rotation);
  if (next) {
    std::string value = fleet::encode_ring(*next);
    const std::array<std::string_view, 3> set{"SET", fleet::ticket_keys_key, value};
    const auto written = co_await link_.command(set, deadline);
    OPENSSL_cleanse(value.data(), value.size());
    if (!is_ok(written)) co_return written ? error_code(net::error::invalid_argument) : written.error();
    if (next->generation != (held_ ? held_->generation : 0))
      spdlog::info("fleet: session ticket keys rotated to generation {}", next->generation);
  }
  const std::array<std::string_view, 2> release{"DEL", fleet::ticket_keys_lease};
  if (const auto released = co_await link_.command(release, deadline); !released) co_return released.error();
  co_return next ? next : *stored;
}

net::awaitable<error_code> FleetTicketKeys::sync_once() {
  const auto deadline = steady_clock().exact() + Fleet::op_timeout;
  auto stored = co_await read_ring(deadline);
  if (!stored) co_return stored.error();
  const auto rotation = std::chrono::duration_cast<std::chrono::milliseconds>(config_.ticket_key_rotation);
  if (!*stored || unix_ms() >= (*stored)->rotated_ms + rotation.count()) {
    stored = co_await take_turn(deadline);
    if (!stored) co_return stored.error();
  }
  if (*stored && (!held_ || !(**stored == *held_))) adopt(**stored);
  if (held_) settled_ = true;
  co_return error_code{};
}

void FleetTicketKeys::adopt(const fleet::TicketKeyRing& ring) {
  keys_->set(fleet::listener_order(ring));
  held_ = ring;
  spdlog::info("fleet: session ticket keys of generation {} in use", ring.generation);
}

boost::json::object FleetTicketKeys::status() const {
  boost::json::object o;
  o["generation"] = held_ ? held_->generation : 0;
  o["rotated_ms_ago"] = held_ ? std::max<std::int64_t>(0, unix_ms() - held_->rotated_ms) : 0;
  o["rotation_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(config_.ticket_key_rotation).count();
  o["redis_up"] = up_;
  return o;
}

// [fleet] with a TLS listener that has no key file: the fleet's keys are loaded before the
// listeners open, so that the first handshake after a start or an upgrade resumes the fleet's
// sessions; a Redis that does not answer within its deadline leaves this instance its own key.
void ControlLoop::start_fleet_tickets() {
  if (!config_->fleet.enabled) return;
  const auto& listeners = config_->server.tls;
  const auto has_file = [](const auto& l) { return !l.session_ticket_key_file.empty(); };
  if (std::all_of(listeners.begin(), listeners.end(), has_file)) return;
  const auto name = config_->fleet.name.empty() ? default_fleet_name(*config_) : config_->fleet.name;
  fleet_tickets_ = std::make_unique<FleetTicketKeys>(io_, config_->fleet, name);
  fleet_tickets_->start();
  const auto until = std::chrono::steady_clock::now() + 2 * Fleet::op_timeout;
  while (!fleet_tickets_->settled() && std::chrono::steady_clock::now() < until)
    if (io_.run_one_until(until) == 0) break;
  io_.restart();
}

}  // namespace sluice
