#pragma once
// The counters of exchanges no upstream took part in: sluice's answers before a request was
// routed (400, 408, 414, 431 on a head; 404 without a route) and `return` routes' answers. They
// are sluice_requests_total{upstream="",server=""}, so that every answer sluice gives is counted
// somewhere. Written by each worker in its own slot, summed by the control thread at scrape.
#include "sluice/endpoint/endpoint.hpp"

namespace sluice::proxy {

EndpointCounters& unrouted_counters(unsigned worker) noexcept;

// Calls f(const EndpointCounters&) for every worker's slot (a scrape).
template <class F>
void for_each_unrouted(unsigned workers, F&& f) {
  for (unsigned w = 0; w < workers; ++w) f(std::as_const(unrouted_counters(w)));
}

}  // namespace sluice::proxy
