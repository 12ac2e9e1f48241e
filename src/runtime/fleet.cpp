// Fleet mode (fleet.hpp): the sync loop, the subscriber, and what a sync applies.
#include "sluice/runtime/fleet.hpp"

#include "sluice/runtime/reload_watch.hpp"

#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <spdlog/spdlog.h>

namespace sluice {

namespace net = boost::asio;
namespace json = boost::json;
using boost::system::error_code;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);

std::string redis_text(const config::FleetSection& c) { return c.redis; }

std::string milliseconds_text(Clock::duration d) {
  return std::to_string(std::max<long long>(1, std::chrono::duration_cast<std::chrono::milliseconds>(d).count()));
}

void log_failure(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    spdlog::error("fleet: {}", x.what());
  }
}

}  // namespace

std::string default_fleet_name(const config::Config& config) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "sluice");
  const auto& plain = config.server.listen;
  const auto& tls = config.server.tls;
  const config::HostPort* first = !plain.empty() ? &plain.front()
                                  : !tls.empty() && !tls.front().listen.empty() ? &tls.front().listen.front()
                                                                                 : nullptr;
  std::string name = first ? std::string(host) + "/" + first->to_string() : std::string(host);
  // Port 0 is a different port in each process: the pid tells such instances apart.
  if (first == nullptr || first->port == 0) name.append("/").append(std::to_string(::getpid()));
  return name;
}

Fleet::Fleet(net::io_context& io, const config::FleetSection& config, std::string name,
             SnapshotSource snapshot, ApplyDrain apply, ApplyVerdict verdict)
    : config_(config),
      name_(std::move(name)),
      snapshot_(std::move(snapshot)),
      apply_(std::move(apply)),
      verdict_(std::move(verdict)),
      link_(io.get_executor(), config_),
      subscriber_(io.get_executor(), config_),
      tick_(io),
      backoff_(io),
      sub_backoff_(io) {}

Fleet::~Fleet() = default;

void Fleet::start() {
  spdlog::info("fleet: instance {} with Redis at {}", name_, redis_text(config_));
  net::co_spawn(tick_.get_executor(), run_sync(), log_failure);
  net::co_spawn(tick_.get_executor(), run_subscriber(), log_failure);
}

void Fleet::stop() {
  stopped_ = true;
  tick_.cancel();
  backoff_.cancel();
  sub_backoff_.cancel();
  link_.close();
  subscriber_.close();
}

void Fleet::wake() {
  wake_pending_ = true;
  tick_.cancel();
}

net::awaitable<void> Fleet::pause(net::steady_timer& timer, std::chrono::milliseconds d) {
  timer.expires_after(d);
  co_await timer.async_wait(nothrow);
}

// The sync period, cut short by wake(); a wake that came during the sync ends it at once.
net::awaitable<void> Fleet::until_next_sync() {
  if (!wake_pending_) co_await pause(tick_, sync_period);
  wake_pending_ = false;
}

void Fleet::drained_here(const std::string& upstream, const std::string& server, bool drain) {
  unpublished_[fleet::server_field(upstream, server)] = drain;
  wake();
}

// Logged once per outage; others_ is dropped: counts nobody refreshes are not trusted.
void Fleet::lost(error_code ec) {
  settled_ = true;
  up_ = false;
  others_.clear();
  leases_.clear();  // unknown until Redis answers: every server is probed here meanwhile
  verdicts_.clear();
  if (reported_down_) return;
  reported_down_ = true;
  ++lost_;
  spdlog::warn("fleet: Redis at {} unreachable ({}); drains stay as they are and are this instance's own "
               "until it returns", redis_text(config_), ec.message());
}

void Fleet::back() {
  if (reported_down_) spdlog::info("fleet: Redis at {} reachable again; drains resynced", redis_text(config_));
  reported_down_ = false;
  up_ = true;
  settled_ = true;
}

net::awaitable<void> Fleet::run_sync() {
  unsigned failures = 0;
  while (!stopped_) {
    if (!link_.is_open()) {
      if (failures > 0) co_await pause(backoff_, fleet::reconnect_delay(failures, jitter()));
      if (stopped_) break;
      if (const auto ec = co_await link_.connect(steady_clock().exact() + op_timeout)) {
        ++failures;
        if (!stopped_) lost(ec);
        continue;
      }
      seed_check_ = true;
    }
    if (const auto ec = co_await sync_once()) {
      ++failures;
      link_.close();
      if (!stopped_) lost(ec);
      continue;
    }
    failures = 0;
    back();
    co_await until_next_sync();
  }
}

// A message says the hash changed: the sync loop reads it now. Reconnects after a failure, and
// then syncs too (messages sent meanwhile were missed).
net::awaitable<void> Fleet::run_subscriber() {
  unsigned failures = 0;
  while (!stopped_) {
    if (failures > 0) co_await pause(sub_backoff_, fleet::reconnect_delay(failures, jitter()));
    if (stopped_) break;
    std::vector<std::string_view> subscribe{"SUBSCRIBE", fleet::drains_channel, fleet::verdicts_channel};
    if (config_.share_ejections) subscribe.push_back(fleet::ejections_channel);
    bool subscribed = false;
    if (const auto ec = co_await subscriber_.connect(steady_clock().exact() + op_timeout); !ec) {
      const auto reply = co_await subscriber_.command(subscribe, steady_clock().exact() + op_timeout);
      subscribed = reply.has_value();
    }
    if (!subscribed) {
      ++failures;
      subscriber_.close();
      continue;
    }
    failures = 1;  // after this connection ends, a pause before the next
    wake();
    // Messages come when someone drains; the deadline only bounds a connection nobody uses.
    while (!stopped_) {
      const auto message = co_await subscriber_.next_reply(steady_clock().exact() + std::chrono::hours(1));
      if (!message) break;
      on_message(*message);
    }
  }
}

net::awaitable<error_code> Fleet::sync_once() {
  const auto deadline = steady_clock().exact() + op_timeout;
  if (seed_check_) {
    if (const auto ec = co_await seed(deadline)) co_return ec;
    seed_check_ = false;
  }
  if (const auto ec = co_await publish_changes(deadline)) co_return ec;
  if (const auto ec = co_await read_drains(deadline)) co_return ec;
  apply(fleet::merged_drains(remote_, unpublished_));
  if (const auto ec = co_await exchange_reports(deadline)) co_return ec;
  if (const auto ec = co_await keep_leases(deadline)) co_return ec;
  if (const auto ec = co_await publish_verdicts(deadline)) co_return ec;
  if (config_.share_ejections) co_return co_await share_ejections(deadline);
  co_return error_code{};
}

// A hash that was never written or that Redis lost (restarted without persistence): this
// instance writes the drains it holds, so that a restart of Redis undrains nothing.
net::awaitable<error_code> Fleet::seed(Clock::time_point deadline) {
  const std::array<std::string_view, 2> exists{"EXISTS", fleet::seeded_key};
  const auto there = co_await link_.command(exists, deadline);
  if (!there) co_return there.error();
  if (there->integer != 0) co_return error_code{};
  const auto snapshot = snapshot_();
  for (const auto& u : snapshot->upstreams)
    for (const Endpoint* ep : u->endpoints())
      if (ep->draining() && ep->drained_by_api()) unpublished_.try_emplace(fleet::server_field(u->name(), ep->identity()), true);
  const std::array<std::string_view, 3> mark{"SET", fleet::seeded_key, name_};
  const auto set = co_await link_.command(mark, deadline);
  co_return set ? error_code{} : set.error();
}

// Each change made here goes to the hash, then to the channel. A change made again while it was
// being written stays for the next sync.
net::awaitable<error_code> Fleet::publish_changes(Clock::time_point deadline) {
  const auto changes = unpublished_;
  for (const auto& [field, drained] : changes) {
    const std::array<std::string_view, 4> hset{"HSET", fleet::drains_key, field, name_};
    const std::array<std::string_view, 3> hdel{"HDEL", fleet::drains_key, field};
    // One co_await per statement: GCC 12 mis-handles a co_await inside ?: and ||.
    auto written = co_await link_.command(drained ? std::span<const std::string_view>(hset)
                                                  : std::span<const std::string_view>(hdel),
                                          deadline);
    if (!written) co_return written.error();
    const std::array<std::string_view, 3> publish{"PUBLISH", fleet::drains_channel, field};
    const auto published = co_await link_.command(publish, deadline);
    if (!published) co_return published.error();
    const auto now = unpublished_.find(field);
    if (now != unpublished_.end() && now->second == drained) unpublished_.erase(now);
  }
  co_return error_code{};
}

net::awaitable<error_code> Fleet::read_drains(Clock::time_point deadline) {
  const std::array<std::string_view, 2> hkeys{"HKEYS", fleet::drains_key};
  const auto keys = co_await link_.command(hkeys, deadline);
  if (!keys) co_return keys.error();
  remote_.clear();
  for (const auto& k : keys->elements) remote_.insert(k.str);
  co_return error_code{};
}

// Applies the fleet's drains to this instance's servers. A drain from the config file is the
// file's: the fleet neither lifts it nor takes it over.
void Fleet::apply(const std::set<std::string>& drained) {
  const auto snapshot = snapshot_();
  for (const auto& u : snapshot->upstreams) {
    for (Endpoint* ep : u->endpoints()) {
      const bool want = drained.contains(fleet::server_field(u->name(), ep->identity()));
      if (want && !ep->draining()) apply_(u->name(), *ep, true);
      else if (!want && ep->draining() && ep->drained_by_api()) apply_(u->name(), *ep, false);
    }
  }
}

const std::string& Fleet::config_version() const {
  const auto snapshot = snapshot_();
  if (snapshot->config != fingerprinted_) {
    fingerprinted_ = snapshot->config;
    fingerprint_ = config_fingerprint(snapshot->config->text);
  }
  return fingerprint_;
}

fleet::Report Fleet::own_report() const {
  fleet::Report r;
  r.config = config_version();
  r.at_ms = fleet::unix_ms();
  for (const auto& [field, renew] : leases_) r.probes.push_back(field);
  const auto snapshot = snapshot_();
  for (const auto& u : snapshot->upstreams)
    for (const Endpoint* ep : u->endpoints()) {
      if (ep->draining()) r.draining[fleet::server_field(u->name(), ep->identity())] = ep->in_flight();
      const auto state = ep->state();
      if (state == ServerState::down || state == ServerState::ejected)
        r.out[fleet::server_field(u->name(), ep->identity())] = to_string(state);
    }
  return r;
}

// Writes this instance's report and reads the others' (an expired one: that instance is gone,
// and its requests with it).
net::awaitable<error_code> Fleet::exchange_reports(Clock::time_point deadline) {
  const auto key = fleet::instance_key(name_);
  const auto report = fleet::encode_report(own_report());
  const auto ttl = milliseconds_text(config_.lease_ttl);
  const std::array<std::string_view, 5> set{"SET", key, report, "PX", ttl};
  const std::array<std::string_view, 3> add{"SADD", fleet::instances_key, name_};
  const std::array<std::string_view, 2> members{"SMEMBERS", fleet::instances_key};
  auto r = co_await link_.command(set, deadline);
  if (r) r = co_await link_.command(add, deadline);
  if (r) r = co_await link_.command(members, deadline);
  if (!r) co_return r.error();
  std::vector<std::string> names;
  std::vector<std::string> keys;
  for (const auto& m : r->elements) {
    if (m.str == name_) continue;
    names.push_back(m.str);
    keys.push_back(fleet::instance_key(m.str));
  }
  // The reports are replaced whole once all are read: `drain --wait` reads them between these
  // awaits, and an empty map there would read as "no instance has a request in flight".
  std::map<std::string, fleet::Report> fresh;
  if (!names.empty()) {
    std::vector<std::string_view> mget{"MGET"};
    mget.insert(mget.end(), keys.begin(), keys.end());
    const auto values = co_await link_.command(mget, deadline);
    if (!values) co_return values.error();
    for (std::size_t i = 0; i < names.size() && i < values->elements.size(); ++i)
      if (values->elements[i].type == fleet::Reply::Type::string)
        fresh[names[i]] = fleet::decode_report(values->elements[i].str);
  }
  others_ = std::move(fresh);
  co_return error_code{};
}

// A drain changed: read the hash now. A verdict of another instance's prober: applied here as
// this prober's own, unless this instance holds that server's lease.
void Fleet::on_message(const fleet::Reply& message) {
  const auto& e = message.elements;
  if (e.size() == 3 && e[0].str == "message" && e[1].str == fleet::ejections_channel)
    return on_ejection_message(e[2].str);
  if (e.size() != 3 || e[0].str != "message" || e[1].str != fleet::verdicts_channel) return wake();
  const auto v = fleet::decode_verdict(e[2].str);
  if (!v || v->from == name_ || !up_ || leases_.contains(fleet::server_field(v->upstream, v->server))) return;
  verdict_(*v);
}

std::set<std::string> Fleet::probed_servers() const {
  std::set<std::string> out;
  const auto snapshot = snapshot_();
  for (const auto& u : snapshot->upstreams)
    if (u->config().health)
      for (const Endpoint* ep : u->endpoints()) out.insert(fleet::server_field(u->name(), ep->identity()));
  return out;
}

bool Fleet::may_probe(const std::string& upstream, const std::string& server) const {
  return !up_ || leases_.contains(fleet::server_field(upstream, server));
}

void Fleet::probed(const std::string& upstream, const std::string& server, const health::ProbeResult& result) {
  if (!up_ || !leases_.contains(fleet::server_field(upstream, server))) return;
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(result.latency).count();
  verdicts_.push_back(fleet::encode_verdict({name_, upstream, server, result.passed, result.detail, us}));
}

// Each probed server's lease: renewed when due, released when this instance holds more than
// its share (another takes it at its next sync), taken when free and within the share.
net::awaitable<error_code> Fleet::keep_leases(Clock::time_point deadline) {
  const auto servers = probed_servers();
  std::erase_if(leases_, [&](const auto& l) { return !servers.contains(l.first); });
  const auto share = fleet::fair_share(servers.size(), others_.size() + 1);
  for (const auto& field : servers)
    if (const auto ec = co_await keep_lease(field, share, deadline)) co_return ec;
  co_return error_code{};
}

net::awaitable<error_code> Fleet::keep_lease(const std::string& field, std::size_t share,
                                             Clock::time_point deadline) {
  // Only the holder renews or releases: a lease that expired meanwhile may be another's.
  constexpr std::string_view renew =
      "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
  constexpr std::string_view release =
      "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";
  const auto key = fleet::lease_key(field);
  const auto ttl = milliseconds_text(config_.lease_ttl);
  const auto now = steady_clock().exact();
  const auto held = leases_.find(field);
  if (held != leases_.end() && now < held->second) co_return error_code{};
  const bool excess = held != leases_.end() && leases_.size() > share;
  if (held == leases_.end() && leases_.size() >= share) co_return error_code{};
  const std::array<std::string_view, 5> drop{"EVAL", release, "1", key, name_};
  const std::array<std::string_view, 6> extend{"EVAL", renew, "1", key, name_, ttl};
  const std::array<std::string_view, 6> take{"SET", key, name_, "NX", "PX", ttl};
  auto r = co_await link_.command(held == leases_.end() ? std::span<const std::string_view>(take)
                                  : excess             ? std::span<const std::string_view>(drop)
                                                       : std::span<const std::string_view>(extend),
                                  deadline);
  if (!r) co_return r.error();
  const bool ours = !excess && (r->type == fleet::Reply::Type::status || r->integer == 1);
  if (!ours) {
    if (held != leases_.end()) leases_.erase(held);
    co_return error_code{};
  }
  const auto ttl_ms = std::chrono::duration_cast<std::chrono::milliseconds>(config_.lease_ttl);
  leases_[field] = now + fleet::renew_after(ttl_ms, jitter());
  co_return error_code{};
}

net::awaitable<error_code> Fleet::publish_verdicts(Clock::time_point deadline) {
  auto verdicts = std::move(verdicts_);
  verdicts_.clear();
  for (const auto& v : verdicts) {
    const std::array<std::string_view, 3> publish{"PUBLISH", fleet::verdicts_channel, v};
    const auto r = co_await link_.command(publish, deadline);
    if (!r) co_return r.error();
  }
  co_return error_code{};
}

fleet::FleetInFlight Fleet::in_flight(const std::string& upstream, const std::string& server,
                                      std::int64_t local) const {
  std::vector<fleet::Report> reports;
  for (const auto& [name, r] : others_) reports.push_back(r);
  return fleet::sum_in_flight(fleet::server_field(upstream, server), local, reports);
}

json::object Fleet::status() const {
  json::object o;
  o["name"] = name_;
  o["redis"] = redis_text(config_);
  o["redis_up"] = up_;
  o["redis_lost"] = lost_;
  json::array drains;
  for (const auto& d : fleet::merged_drains(remote_, unpublished_)) drains.push_back(json::string(d));
  o["drains"] = std::move(drains);
  json::array unpublished;
  for (const auto& [field, drained] : unpublished_)
    unpublished.push_back(json::object{{"server", field}, {"drain", drained}});
  o["unpublished"] = std::move(unpublished);
  o["config"] = config_version();
  json::array probes;
  for (const auto& [field, renew] : leases_) probes.push_back(json::string(field));
  o["probes"] = std::move(probes);  // the servers whose lease this instance holds
  json::object instances;
  const auto now = fleet::unix_ms();
  for (const auto& [name, r] : others_) {
    json::object draining;
    for (const auto& [field, n] : r.draining) draining[field] = n;
    json::object i;
    i["last_heard_ms_ago"] = now - r.at_ms;  // by the two instances' clocks
    i["config"] = r.config;
    i["same_config"] = r.config == config_version();
    i["draining"] = std::move(draining);
    json::array held;
    for (const auto& field : r.probes) held.push_back(json::string(field));
    i["probes"] = std::move(held);
    instances[name] = std::move(i);
  }
  o["instances"] = std::move(instances);
  json::object disagreements;  // servers the instances' verdicts differ on
  for (const auto& [field, views] : fleet::verdict_disagreements(name_, own_report(), others_)) {
    json::object by;
    for (const auto& [name, state] : views) by[name] = state;
    disagreements[field] = std::move(by);
  }
  o["disagreements"] = std::move(disagreements);
  o["share_ejections"] = config_.share_ejections;
  o["ejections"] = ejections_json();
  return o;
}

}  // namespace sluice
