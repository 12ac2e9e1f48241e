#pragma once
// Runs a coroutine on `io` until no work is left and returns its result; nullopt when it did not
// finish (it is still suspended: the test's stream or hooks never completed it). An exception it
// throws is rethrown. For the phases' tests, which drive one coroutine on beast::test::stream.
#include <exception>
#include <optional>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

namespace sluice::proxy::test_support {

template <class T>
std::optional<T> run_to_end(boost::asio::io_context& io, boost::asio::awaitable<T> coroutine) {
  std::optional<T> out;
  boost::asio::co_spawn(io, std::move(coroutine), [&](std::exception_ptr e, T result) {
    if (e) std::rethrow_exception(e);
    out = std::move(result);
  });
  io.run();
  io.restart();
  return out;
}

}  // namespace sluice::proxy::test_support
