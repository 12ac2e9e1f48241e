#pragma once
// Building a Snapshot (proxy/snapshot.hpp) from a Config, on the control thread.
#include <memory>

#include "sluice/config/config.hpp"
#include "sluice/proxy/snapshot.hpp"
#include "sluice/upstream/upstream.hpp"

namespace sluice {

// A route as the data path uses it: its upstream (null when it answers itself) and its edge rules
// compiled (docs/edge.md). A config without routes is one route over its single upstream.
Router::Route compile_route(const config::RouteConfig& route, const Upstream* upstream);

// Control thread only. `directory` carries endpoint state across reloads; `previous` (the
// snapshot being replaced, if any) carries each kept route's rate limiter and counters. Throws
// std::runtime_error (e.g. a host name that does not resolve, a certificate that cannot be
// loaded any more). `ocsp`, when given, staples the listener certificates' OCSP status;
// `ticket_keys`, when given, are the fleet's session ticket keys for listeners without a key file.
std::shared_ptr<const Snapshot> build_snapshot(std::shared_ptr<const config::Config> config,
                                               EndpointDirectory& directory, std::uint64_t version,
                                               const Snapshot* previous = nullptr,
                                               tls::OcspStapler* ocsp = nullptr,
                                               std::shared_ptr<tls::TicketKeys> ticket_keys = nullptr);

}  // namespace sluice
