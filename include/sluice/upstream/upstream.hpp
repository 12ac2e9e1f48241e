#pragma once
// An upstream group as one config snapshot sees it: its settings, its endpoints, its balancer,
// and the per-upstream shared state of the data path (retry budget, passive failure
// classification). Built on the control thread, then only read by workers (atomics aside).
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sluice/balancer/balancer.hpp"
#include "sluice/balancer/hash_key.hpp"
#include "sluice/config/config.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/endpoint/endpoint.hpp"
#include "sluice/config/fail_on.hpp"
#include "sluice/health/ejection_guard.hpp"
#include "sluice/health/server_health.hpp"
#include "sluice/tls/context.hpp"
#include "sluice/upstream/retry_budget.hpp"

namespace sluice::http {
enum class KnownField : std::uint8_t;  // head_index.hpp
}

namespace sluice::idempotency {
class Guard;
}

namespace sluice {

// Requests waiting for a server slot when every candidate is at max_conns (HAProxy's maxconn +
// queue): bounded, first come first served. Touched only when an upstream is saturated, so a
// mutex is fine here; waiters poll for the head position (see Forwarder::queue_step, proxy/forwarder.hpp).
class WaitQueue {
public:
  // A ticket, or 0 when `capacity` requests are already waiting.
  std::uint64_t enter(std::uint32_t capacity);
  bool is_head(std::uint64_t ticket);
  void leave(std::uint64_t ticket);
  std::size_t size();

private:
  std::mutex mutex_;
  std::deque<std::uint64_t> tickets_;
  std::uint64_t next_ = 1;
};

class Upstream {
public:
  Upstream(config::UpstreamConfig config, std::vector<std::shared_ptr<Endpoint>> endpoints,
           std::shared_ptr<EndpointCounters[]> unserved, unsigned workers = 1);
  Upstream(const Upstream&) = delete;
  Upstream& operator=(const Upstream&) = delete;

  const std::string& name() const noexcept { return config_.name; }
  const config::UpstreamConfig& config() const noexcept { return config_; }
  std::span<Endpoint* const> endpoints() const noexcept { return raw_; }
  const std::vector<std::shared_ptr<Endpoint>>& shared_endpoints() const noexcept { return endpoints_; }
  Endpoint* endpoint(std::uint32_t index) const noexcept { return raw_[index]; }

  // The TLS settings of connections to this upstream's TLS servers; nullptr when none uses TLS.
  // Immutable, shared by every worker.
  tls::ClientContext* tls_context() const noexcept { return tls_.get(); }
  const std::shared_ptr<tls::ClientContext>& shared_tls_context() const noexcept { return tls_; }
  // The name a TLS server of this upstream is asked for (SNI) and verified against.
  const std::string& tls_server_name(const Endpoint& ep) const noexcept {
    return config_.tls_server_name.empty() ? ep.address().host : config_.tls_server_name;
  }

  // Thread-safe (called by every worker).
  Pick pick(const PickContext& ctx) const { return balancer_->pick(ctx); }

  // Which live results count as failures for passive health ([passive] fail_on).
  const health::FailOn& fail_on() const noexcept { return config_.passive.fail_on; }
  // This worker's slice of the upstream's retry budget (touched by that worker only).
  RetryBudget& retry_budget(unsigned worker) const noexcept { return budget_.slice(worker); }
  // Counters of answers that no server gave (no server available, no healthy server), per
  // worker; kept by the directory so that they survive reloads.
  EndpointCounters& unserved(unsigned worker) const noexcept {
    return unserved_[worker % Endpoint::max_worker_slots];
  }
  WaitQueue& queue() const noexcept { return queue_; }
  // The idempotency policy ([idempotency] mode != "off"), else nullptr. Set once by the snapshot
  // build, before any worker sees the upstream.
  const idempotency::Guard* idempotency() const noexcept { return idempotency_.get(); }
  const std::shared_ptr<const idempotency::Guard>& shared_idempotency() const noexcept { return idempotency_; }
  void set_idempotency(std::shared_ptr<const idempotency::Guard> guard) { idempotency_ = std::move(guard); }
  // [retry] idempotency_header, classified once (http::HeadIndex::count(name, known)).
  http::KnownField idempotency_field() const noexcept { return idempotency_field_; }
  // Set for `balance = "hash"`: the request key to hash.
  const std::optional<HashKey>& hash_key() const noexcept { return hash_key_; }

private:
  config::UpstreamConfig config_;
  std::vector<std::shared_ptr<Endpoint>> endpoints_;  // keeps them alive for this snapshot
  std::vector<Endpoint*> raw_;                         // what the balancer iterates
  std::unique_ptr<Balancer> balancer_;
  std::optional<HashKey> hash_key_;
  http::KnownField idempotency_field_;
  std::shared_ptr<EndpointCounters[]> unserved_;
  mutable WaitQueue queue_;
  mutable RetryBudgets budget_;  // retries of this snapshot's upstream, per worker
  std::shared_ptr<tls::ClientContext> tls_;
  std::shared_ptr<const idempotency::Guard> idempotency_;
};

health::HealthPolicy health_policy(const config::UpstreamConfig& config);

// Endpoints by (upstream, identity), across reloads: an identity that stays keeps its Endpoint
// object and with it its health, drain flag, counters and pooled connections. Control thread only.
class EndpointDirectory {
public:
  explicit EndpointDirectory(const Clock& clock) : clock_(clock) {}

  // Builds the endpoints of one upstream for a new snapshot: existing ones (same identity and
  // address) are reused and reconfigured, new ones created with their health state machine.
  // Resolves host names (may block on DNS). Throws std::runtime_error on failure.
  std::vector<std::shared_ptr<Endpoint>> obtain(const config::UpstreamConfig& upstream);
  // The upstream's counters of answers no server gave, by upstream name (kept across reloads).
  std::shared_ptr<EndpointCounters[]> unserved_counters(const std::string& upstream);
  // Forgets endpoints that the latest build did not use (they live on while a snapshot holds them).
  void prune();

private:
  struct Entry {
    std::string key;  // upstream + '\n' + identity
    std::shared_ptr<Endpoint> endpoint;
    bool toml_drain = false;  // `drain` as the config last said
    bool used = false;
  };
  const Clock& clock_;
  bool running_ = false;  // a build was published: new servers join a running upstream
  std::vector<Entry> known_;
  std::vector<std::pair<std::string, std::shared_ptr<EndpointCounters[]>>> unserved_;
};

// Resolves "host" (an IP literal or a name) to one address; control thread only.
boost::asio::ip::tcp::endpoint resolve_host_port(const config::HostPort& hp);

}  // namespace sluice
