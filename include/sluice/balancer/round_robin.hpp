#pragma once
// Equal shares in list order, skipping unavailable and already-tried servers. One cursor per
// worker (no cache line written by every worker on every request): each worker rotates over all
// servers in list order, so every n consecutive picks of one worker hold each server once: with
// W workers two servers' totals differ by at most W, and not at all when every worker made a
// multiple of n picks (3 workers x 3,000 requests over 3 servers = 3,000 each, whatever the
// interleaving). Worker w starts at server w, so that workers do not all begin on the first
// server. nginx has the same shape (each worker process keeps its own rotation); the proportions
// are exact per worker, the order between workers interleaves. (Skipping a server moves only the
// skipping worker past it; retries never move a cursor.)
#include <atomic>

#include "sluice/balancer/balancer.hpp"
#include "sluice/core/per_worker.hpp"

namespace sluice {

class RoundRobin final : public Balancer {
public:
  explicit RoundRobin(std::span<Endpoint* const> endpoints,
                      unsigned workers = default_worker_slots);
  Pick pick(const PickContext& ctx) override;

private:
  std::span<Endpoint* const> endpoints_;
  PerWorker<std::atomic<std::uint64_t>> cursor_;  // the next request's first choice, per worker
};

}  // namespace sluice
