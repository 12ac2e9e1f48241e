#include "sluice/runtime/fd_budget.hpp"

#include <sys/resource.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "sluice/upstream/pool.hpp"

namespace sluice {

std::uint64_t max_idle_pooled(const config::Config& config, unsigned workers) {
  std::uint64_t total = 0;
  for (const auto& u : config.upstreams)
    total += static_cast<std::uint64_t>(u.keepalive) * ConnectionPool::surplus_factor * u.servers.size() * workers;
  return total;
}

std::uint32_t connections_within(std::uint64_t fd_limit, std::uint64_t reserved,
                                 std::uint32_t max_connections) {
  const std::uint64_t usable = fd_limit > reserved ? fd_limit - reserved : 0;
  return static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(usable / 2, 1, std::max<std::uint32_t>(max_connections, 1)));
}

std::uint64_t raise_fd_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;  // the usual default, if we cannot ask
  if (r.rlim_cur < r.rlim_max) {
    rlimit raised = r;
    // An unlimited hard limit is still capped by fs.nr_open: ask for a generous fixed amount.
    raised.rlim_cur = r.rlim_max == RLIM_INFINITY ? std::max<rlim_t>(r.rlim_cur, 1 << 20) : r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  return r.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<std::uint64_t>(r.rlim_cur);
}

std::uint32_t connections_per_worker(const config::Config& cfg, unsigned workers) {
  const auto fd_limit = raise_fd_limit();
  const auto reserved = fd_reserve + max_idle_pooled(cfg, workers);
  const auto max_connections = connections_within(fd_limit, reserved, cfg.server.max_connections);
  if (max_connections < cfg.server.max_connections) {
    // The default is a ceiling that the fd limit may lower without anyone having asked for more:
    // that is said at info. A value the operator wrote that cannot be honoured is a warning.
    const bool is_default = cfg.server.max_connections == config::ServerSection{}.max_connections;
    spdlog::log(is_default ? spdlog::level::info : spdlog::level::warn,
                "max_connections {} needs about {} file descriptors, the limit is {}: accepting at "
                "most {} connections (raise `ulimit -n` to allow more)",
                cfg.server.max_connections, 2ULL * cfg.server.max_connections + reserved, fd_limit,
                max_connections);
  }
  return (max_connections + workers - 1) / workers;
}

}  // namespace sluice
