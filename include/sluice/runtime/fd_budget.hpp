#pragma once
// File descriptors versus max_connections. Every client connection can hold an upstream
// connection too, and the pools keep idle ones; if max_connections promises more than the
// process's RLIMIT_NOFILE can hold, the limit is met in the middle of serving (an upstream
// connect fails with EMFILE and an already accepted client gets a 502) instead of at accept time
// (where the excess just waits in the backlog). So the accept limit is clamped to what the file
// descriptors allow, once, at start-up.
#include <cstdint>

#include "sluice/config/config.hpp"

namespace sluice {

// Descriptors kept aside for everything but client and upstream connections: listeners, the
// admin API and its clients, log files, inotify, probes, stdio.
inline constexpr std::uint64_t fd_reserve = 64;

// Idle upstream connections the pools may hold at most: keepalive per server per worker, times
// the surplus a burst may leave for a while (ConnectionPool::surplus_factor).
std::uint64_t max_idle_pooled(const config::Config& config, unsigned workers);

// Client connections that fit in `fd_limit` descriptors: two per connection (itself and its
// upstream connection) after `reserved` descriptors; at most `max_connections`, at least 1.
std::uint32_t connections_within(std::uint64_t fd_limit, std::uint64_t reserved,
                                 std::uint32_t max_connections);

// Raises the soft RLIMIT_NOFILE to the hard limit (as nginx's worker_rlimit_nofile would) and
// returns the soft limit in force afterwards.
std::uint64_t raise_fd_limit();

// Each worker's share of server.max_connections, clamped to what the descriptors can hold (the
// soft limit raised first), so that the limit is met at accept time (the excess waits in the
// backlog) and never mid-request (EMFILE on an upstream connect would turn into a 502 for a
// client already accepted). Logs when it clamps.
std::uint32_t connections_per_worker(const config::Config& cfg, unsigned workers);

}  // namespace sluice
