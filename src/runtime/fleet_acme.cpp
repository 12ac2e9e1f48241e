// ACME certificates in a fleet (fleet_acme.hpp): the certificate shared through Redis, and the
// lease that lets one instance order it.
#include "sluice/runtime/fleet_acme.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <array>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "sluice/core/file.hpp"
#include "sluice/runtime/control_loop.hpp"
#include "sluice/runtime/fleet.hpp"
#include "sluice/runtime/fleet_state.hpp"
#include "sluice/runtime/fleet_task.hpp"
#include "sluice/tls/acme_client.hpp"

namespace sluice {

namespace net = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);
constexpr std::chrono::seconds sync_period{1};

std::string hash_key(const std::string& name) { return "sluice:fleet:acme:" + name; }
std::string lease_key(const std::string& name) { return "sluice:fleet:acme:lease:" + name; }
std::string challenges_key(const std::string& name) { return "sluice:fleet:acme:challenges:" + name; }
constexpr std::string_view challenges_ttl_ms = "600000";  // an order's longest wait for the CA

std::string field_of(const tls::acme::PendingChallenge& c) { return (c.alpn ? "tls-alpn-01 " : "http-01 ") + c.name; }

std::optional<tls::acme::PendingChallenge> challenge_of(const std::string& field, const std::string& value) {
  const auto space = field.find(' ');
  if (space == std::string::npos) return std::nullopt;
  return tls::acme::PendingChallenge{field.substr(0, space) == "tls-alpn-01", field.substr(space + 1), value};
}

void wipe(std::string& secret) { OPENSSL_cleanse(secret.data(), secret.size()); }

}  // namespace

FleetAcme::FleetAcme(net::io_context& io, const config::FleetSection& config, std::string name,
                     std::vector<std::shared_ptr<tls::acme::Slot>> slots)
    : config_(config),
      name_(std::move(name)),
      slots_(std::move(slots)),
      link_(io.get_executor(), config_),
      timer_(io) {}

void FleetAcme::start() { fleet::spawn_task(timer_.get_executor(), run(), "ACME"); }

void FleetAcme::stop() {
  stopped_ = true;
  timer_.cancel();
  link_.close();
}

bool FleetAcme::may_order(const std::string& name) const {
  std::lock_guard lock(mutex_);
  if (!settled_) return false;
  return !up_ || leases_.contains(name);
}

void FleetAcme::lost(error_code ec) {
  std::lock_guard lock(mutex_);
  settled_ = true;
  up_ = false;
  leases_.clear();
  if (reported_down_) return;
  reported_down_ = true;
  spdlog::warn("fleet: Redis at {} unreachable ({}); ACME certificates are ordered by each instance until it returns",
               config_.redis, ec.message());
}

net::awaitable<void> FleetAcme::run() {
  unsigned failures = 0;
  while (!stopped_) {
    std::chrono::milliseconds wait = sync_period;
    const auto deadline = steady_clock().exact() + Fleet::op_timeout;
    error_code ec;
    if (!link_.is_open()) ec = co_await link_.connect(deadline);
    for (auto& slot : slots_)
      if (!ec) ec = co_await sync(*slot, deadline);
    if (ec) {
      link_.close();
      if (!stopped_) lost(ec);
      wait = fleet::reconnect_delay(++failures, std::uniform_real_distribution<double>(0.0, 1.0)(random_));
    } else {
      failures = 0;
      std::lock_guard lock(mutex_);
      if (reported_down_) spdlog::info("fleet: Redis at {} reachable again; ACME certificates shared", config_.redis);
      reported_down_ = false;
      settled_ = up_ = true;
    }
    if (stopped_) break;
    timer_.expires_after(wait);
    co_await timer_.async_wait(nothrow);
  }
}

// Redis's certificate when it expires later than this instance's; this instance's to Redis in
// the other case; then the lease, held while the certificate is missing or due.
net::awaitable<error_code> FleetAcme::sync(tls::acme::Slot& slot, Clock::time_point deadline) {
  const std::string& name = slot.domains().front();
  const std::string key = hash_key(name);
  const std::array<std::string_view, 4> get{"HMGET", key, "cert", "key"};
  auto reply = co_await link_.command(get, deadline);
  if (!reply) co_return reply.error();
  std::optional<tls::acme::SystemTime> remote;
  if (reply->elements.size() == 2 && reply->elements[0].type == fleet::Reply::Type::string &&
      reply->elements[1].type == fleet::Reply::Type::string) {
    const std::string& cert = reply->elements[0].str;
    std::string& private_key = reply->elements[1].str;
    const auto window = tls::acme::pem_certificate_window(cert);
    const auto local = slot.status().not_after;
    if (window && window->second > std::chrono::system_clock::now() && (!local || window->second > *local)) {
      try {
        tls::acme::store_certificate(slot, cert, private_key);
        spdlog::info("fleet: certificate for {} taken from the fleet", name);
      } catch (const std::exception& e) {
        spdlog::warn("fleet: certificate for {} from the fleet not taken: {}", name, e.what());
      }
    }
    if (window) remote = window->second;
    wipe(private_key);
  }
  const auto local = slot.status().not_after;
  if (local && (!remote || *local > *remote))
    if (const auto ec = co_await publish(slot, key, deadline)) co_return ec;
  const auto window = local ? tls::acme::certificate_window(slot.cert_file()) : std::nullopt;
  const bool needed =
      !window || tls::acme::renewal_time(window->first, window->second) <= std::chrono::system_clock::now();
  if (const auto ec = co_await keep_lease(name, needed, deadline)) co_return ec;
  co_return co_await share_challenges(slot, deadline);
}

// The lease holder's pending challenges are written for the others, which answer them too: the
// CA's validation reaches whichever instance the balancer picks.
net::awaitable<error_code> FleetAcme::share_challenges(tls::acme::Slot& slot, Clock::time_point deadline) {
  const std::string& name = slot.domains().front();
  const std::string key = challenges_key(name);
  const auto pending = slot.pending_challenges();
  bool held = false;
  {
    std::lock_guard lock(mutex_);
    held = leases_.contains(name);
  }
  if (held) {
    if (pending.empty() && !shared_.contains(name)) co_return error_code{};
    std::vector<std::string> fields;
    std::vector<std::string_view> args{pending.empty() ? "DEL" : "HSET", key};
    for (const auto& c : pending) fields.push_back(field_of(c));
    for (std::size_t i = 0; i < pending.size(); ++i)
      args.insert(args.end(), {fields[i], pending[i].key_authorization});
    if (auto r = co_await link_.command(args, deadline); !r) co_return r.error();
    const std::array<std::string_view, 3> expire{"PEXPIRE", key, challenges_ttl_ms};
    if (!pending.empty())
      if (auto r = co_await link_.command(expire, deadline); !r) co_return r.error();
    pending.empty() ? (void)shared_.erase(name) : (void)shared_.insert(name);
    co_return error_code{};
  }
  const std::array<std::string_view, 2> get{"HGETALL", key};
  const auto reply = co_await link_.command(get, deadline);
  if (!reply) co_return reply.error();
  std::vector<tls::acme::PendingChallenge> listed;
  for (std::size_t i = 0; i + 1 < reply->elements.size(); i += 2)
    if (auto c = challenge_of(reply->elements[i].str, reply->elements[i + 1].str)) listed.push_back(std::move(*c));
  if (listed.empty() && !pending.empty()) slot.clear_challenges();
  for (const auto& c : listed) {
    if (std::find(pending.begin(), pending.end(), c) != pending.end()) continue;
    slot.answer(c);
    spdlog::info("fleet: answering the {} challenge for {} of another instance's order",
                 c.alpn ? "tls-alpn-01" : "http-01", name);
  }
  co_return error_code{};
}

net::awaitable<error_code> FleetAcme::publish(tls::acme::Slot& slot, const std::string& key,
                                              Clock::time_point deadline) {
  std::string cert, private_key;
  if (read_whole_file(slot.cert_file(), cert) != 0 || read_whole_file(slot.key_file(), private_key) != 0)
    co_return error_code{};  // nothing whole to share yet
  const std::array<std::string_view, 6> set{"HSET", key, "cert", cert, "key", private_key};
  const auto written = co_await link_.command(set, deadline);
  wipe(private_key);
  if (!written) co_return written.error();
  spdlog::info("fleet: certificate for {} shared with the fleet", slot.domains().front());
  co_return error_code{};
}

net::awaitable<error_code> FleetAcme::keep_lease(const std::string& name, bool needed, Clock::time_point deadline) {
  bool held = false;
  {
    std::lock_guard lock(mutex_);
    held = leases_.contains(name);
  }
  if (!needed && !held) co_return error_code{};
  const std::string lease = lease_key(name);
  const auto ttl_ms = std::chrono::duration_cast<std::chrono::milliseconds>(config_.lease_ttl).count();
  const std::string ttl = std::to_string(ttl_ms);
  boost::system::result<fleet::Reply> reply = fleet::Reply{};
  if (!needed) {  // the certificate is fresh: the order's challenges are over too
    const std::string challenges = challenges_key(name);
    const std::array<std::string_view, 3> del{"DEL", lease, challenges};
    reply = co_await link_.command(del, deadline);
    shared_.erase(name);
  } else if (held) {
    const std::array<std::string_view, 5> renew{"SET", lease, name_, "PX", ttl};
    reply = co_await link_.command(renew, deadline);
  } else {
    const std::array<std::string_view, 6> take{"SET", lease, name_, "NX", "PX", ttl};
    reply = co_await link_.command(take, deadline);
    if (reply && reply->type != fleet::Reply::Type::status) {
      // Taken: by this instance before a restart (same name), or by another.
      const std::array<std::string_view, 2> holder{"GET", lease};
      reply = co_await link_.command(holder, deadline);
      if (reply && reply->type == fleet::Reply::Type::string && reply->str == name_)
        reply->type = fleet::Reply::Type::status;
    }
  }
  if (!reply) co_return reply.error();
  std::lock_guard lock(mutex_);
  if (needed && reply->type == fleet::Reply::Type::status) {
    if (!held) spdlog::info("fleet: this instance orders the certificate for {}", name);
    leases_.insert(name);
  } else {
    leases_.erase(name);
  }
  co_return error_code{};
}

}  // namespace sluice
