#include "sluice/upstream/upstream.hpp"

#include <spdlog/spdlog.h>

#include <stdexcept>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "sluice/balancer/registry.hpp"
#include "sluice/http/head_index.hpp"

namespace sluice {

namespace net = boost::asio;

Upstream::Upstream(config::UpstreamConfig config, std::vector<std::shared_ptr<Endpoint>> endpoints,
                   std::shared_ptr<EndpointCounters[]> unserved, unsigned workers)
    : config_(std::move(config)),
      endpoints_(std::move(endpoints)),
      idempotency_field_(http::classify_field(config_.retry.idempotency_header)),
      budget_(config_.retry, workers) {
  raw_.reserve(endpoints_.size());
  for (const auto& e : endpoints_) raw_.push_back(e.get());
  balancer_ = make_balancer(config_.balance, raw_, config_, workers);
  if (config_.balance == config::Balance::hash) hash_key_.emplace(config_.hash_key);
  unserved_ = unserved ? std::move(unserved)
                       : std::shared_ptr<EndpointCounters[]>(new EndpointCounters[Endpoint::max_worker_slots]);
  if (config_.any_tls())
    tls_ = std::make_shared<tls::ClientContext>(tls::ClientSettings{
        config_.tls_verify, config_.tls_ca_file, config_.tls_cert, config_.tls_key});
}

std::uint64_t WaitQueue::enter(std::uint32_t capacity) {
  std::lock_guard lock(mutex_);
  if (tickets_.size() >= capacity) return 0;
  tickets_.push_back(next_);
  return next_++;
}

bool WaitQueue::is_head(std::uint64_t ticket) {
  std::lock_guard lock(mutex_);
  return !tickets_.empty() && tickets_.front() == ticket;
}

std::size_t WaitQueue::size() {
  std::lock_guard lock(mutex_);
  return tickets_.size();
}

void WaitQueue::leave(std::uint64_t ticket) {
  std::lock_guard lock(mutex_);
  std::erase(tickets_, ticket);
}

health::HealthPolicy health_policy(const config::UpstreamConfig& c) {
  health::HealthPolicy p;
  if (c.health) p.active = health::ActivePolicy{c.health->rise, c.health->fall, c.health->initial_state == config::InitialState::up};
  if (c.passive.max_fails != 0) {
    p.passive = health::PassivePolicy{c.passive.max_fails, c.passive.fail_timeout,
                                      c.passive.max_ejection_time};
  }
  p.slow_start = c.slow_start;
  return p;
}

net::ip::tcp::endpoint resolve_host_port(const config::HostPort& hp) {
  boost::system::error_code ec;
  const auto address = net::ip::make_address(hp.host, ec);
  if (!ec) return {address, hp.port};
  net::io_context io;
  net::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(hp.host, std::to_string(hp.port), ec);
  if (ec || results.empty())
    throw std::runtime_error("cannot resolve '" + hp.host + "': " + ec.message());
  return results.begin()->endpoint();
}

namespace {

// A drain the file sets (or lifts) is said like one through the API, so that the log tells why
// a server gets no traffic.
void log_file_drain(const std::string& upstream, const config::ServerConfig& server) {
  spdlog::info("server {}/{}: {} (drain = {} in the config)", upstream, server.identity(),
               server.drain ? "draining" : "undrained", server.drain ? "true" : "false");
}

}  // namespace

std::vector<std::shared_ptr<Endpoint>> EndpointDirectory::obtain(const config::UpstreamConfig& u) {
  const auto policy = health_policy(u);
  const auto percent = u.passive.max_ejected_percent;
  auto guard = std::make_shared<health::EjectionGuard>(static_cast<std::uint32_t>(u.servers.size()), percent);
  std::vector<std::shared_ptr<Endpoint>> out;
  out.reserve(u.servers.size());
  for (const auto& server : u.servers) {
    const auto key = u.name + '\n' + server.identity();
    const auto resolved = resolve_host_port(server.address);
    std::shared_ptr<Endpoint> endpoint;
    for (auto& entry : known_) {
      if (entry.key == key && entry.endpoint->socket_address() == resolved) {
        entry.used = true;
        endpoint = entry.endpoint;
        endpoint->health().reconfigure(policy, guard);
        // A drain set at run time survives reloads; a change of `drain` in the file is the
        // operator's newer word and wins.
        if (entry.toml_drain != server.drain) {
          endpoint->set_draining(server.drain);
          log_file_drain(u.name, server);
        }
        entry.toml_drain = server.drain;
        break;
      }
    }
    if (!endpoint) {
      endpoint = std::make_shared<Endpoint>(server.identity(), server.address, resolved, server.weight);
      endpoint->set_health(std::make_unique<health::ServerHealth>(*endpoint, policy, guard, clock_));
      if (running_) endpoint->health().ramp_in();
      // Same identity at a new address (an instance replaced in a rollout): a drain set through
      // the API is the operator's word about this identity and carries over.
      bool api_drain = false;
      for (const auto& e : known_)
        if (e.key == key && e.endpoint->drained_by_api()) api_drain = true;
      std::erase_if(known_, [&](const Entry& e) { return e.key == key; });
      endpoint->set_draining(server.drain || api_drain);
      if (server.drain) log_file_drain(u.name, server);
      endpoint->set_drained_by_api(api_drain);
      known_.push_back({key, endpoint, server.drain, true});
    }
    endpoint->set_weight(server.weight);
    endpoint->set_backup(server.backup);
    endpoint->set_max_conns(server.max_conns);
    endpoint->set_tls(server.tls);
    out.push_back(std::move(endpoint));
  }
  return out;
}

std::shared_ptr<EndpointCounters[]> EndpointDirectory::unserved_counters(const std::string& upstream) {
  for (auto& [name, counters] : unserved_)
    if (name == upstream) return counters;
  unserved_.emplace_back(upstream, std::shared_ptr<EndpointCounters[]>(new EndpointCounters[Endpoint::max_worker_slots]));
  return unserved_.back().second;
}

void EndpointDirectory::prune() {
  running_ = true;
  std::erase_if(known_, [](const Entry& e) { return !e.used; });
  for (auto& e : known_) e.used = false;
}

}  // namespace sluice
