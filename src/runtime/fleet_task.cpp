#include "sluice/runtime/fleet_task.hpp"

#include <exception>

#include <boost/asio/co_spawn.hpp>
#include <spdlog/spdlog.h>

namespace sluice::fleet {

void spawn_task(const boost::asio::any_io_executor& ex, boost::asio::awaitable<void> task, std::string what) {
  boost::asio::co_spawn(ex, std::move(task), [what = std::move(what)](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      spdlog::error("fleet: {}: {}", what, x.what());
    }
  });
}

}  // namespace sluice::fleet
