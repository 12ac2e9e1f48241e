#include "listener.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <exception>
#include <iostream>

#include "worker.hpp"

namespace sluice::origin {

namespace {

// A connection coroutine ends by returning; an exception here can only be bad_alloc or a bug.
// Report it and lose that one connection rather than the whole origin.
void report_exception(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    std::cerr << "sluice-origin: connection failed: " << x.what() << std::endl;
  }
}

}  // namespace

listener::listener(std::vector<std::unique_ptr<worker>>& workers, const tcp::endpoint& endpoint)
    : workers_(workers), acceptor_(workers.front()->context()) {
  acceptor_.open(endpoint.protocol());
  // Tests restart an origin on the port it had; TIME_WAIT from the last run must not block that.
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen(asio::socket_base::max_listen_connections);
}

void listener::start() {
  asio::co_spawn(workers_.front()->context(), accept_loop(), report_exception);
}

asio::awaitable<void> listener::accept_loop() {
  std::size_t next = 0;
  asio::steady_timer backoff(acceptor_.get_executor());
  for (;;) {
    worker& target = *workers_[next];
    next = (next + 1) % workers_.size();
    auto [ec, socket] =
        co_await acceptor_.async_accept(target.context(), asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) {
      // Out of descriptors or memory: the pending connection stays queued, so pause instead
      // of spinning on the same error.
      std::cerr << "sluice-origin: accept: " << ec.message() << std::endl;
      backoff.expires_after(std::chrono::milliseconds(50));
      co_await backoff.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    asio::co_spawn(target.context(), connection::serve(target, std::move(socket)),
                   report_exception);
  }
}

}  // namespace sluice::origin
