#pragma once
// A fleet loop started on the control thread's executor (fleet_tickets.hpp, fleet_acme.hpp).
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

namespace sluice::fleet {

// Runs `task` on `ex`; an exception that ends it is logged as "fleet: WHAT: reason".
void spawn_task(const boost::asio::any_io_executor& ex, boost::asio::awaitable<void> task, std::string what);

}  // namespace sluice::fleet
