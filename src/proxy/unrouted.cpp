#include "sluice/proxy/unrouted.hpp"

#include "sluice/core/per_worker.hpp"

namespace sluice::proxy {

EndpointCounters& unrouted_counters(unsigned worker) noexcept {
  // EndpointCounters is a cache line of its own already; max_worker_slots as an endpoint's.
  static PerWorker<EndpointCounters> counters(Endpoint::max_worker_slots);
  return counters[worker];
}

}  // namespace sluice::proxy
