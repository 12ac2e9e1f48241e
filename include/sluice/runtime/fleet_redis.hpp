#pragma once
// One connection to the fleet's Redis (TCP or a Unix socket), on the control thread's executor.
// hiredis is the codec only (idempotency/resp.hpp); the I/O is Asio's, so nothing blocks. Every
// operation ends by its deadline: past it the connection is closed and the operation fails.
// Used by one coroutine at a time (Fleet's sync loop, or its subscriber).
#include <array>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/result.hpp>

#include "sluice/config/config.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/idempotency/resp.hpp"

namespace sluice::fleet {

using idempotency::Reply;

class RedisLink {
public:
  RedisLink(const boost::asio::any_io_executor& ex, const config::FleetSection& where);

  // Connects (resolving a host name without blocking) and selects the database.
  boost::asio::awaitable<boost::system::error_code> connect(Clock::time_point deadline);
  // One command and its reply; an error reply is an error too.
  boost::asio::awaitable<boost::system::result<Reply>> command(std::span<const std::string_view> args,
                                                               Clock::time_point deadline);
  // The next reply that arrives (a subscriber's messages).
  boost::asio::awaitable<boost::system::result<Reply>> next_reply(Clock::time_point deadline);
  bool is_open() const { return socket_.is_open(); }
  void close();

private:
  boost::asio::awaitable<boost::system::error_code> connect_socket(Clock::time_point deadline);
  boost::asio::awaitable<boost::system::result<Reply>> read_reply();
  boost::asio::awaitable<boost::system::result<Reply>> roundtrip(const std::string& bytes);
  // Runs `op` until `deadline`; past it, closes the socket and fails with timed_out.
  template <class Op>
  boost::asio::awaitable<boost::system::result<Reply>> bounded(Op op, Clock::time_point deadline);

  const config::FleetSection& where_;
  boost::asio::generic::stream_protocol::socket socket_;
  boost::asio::steady_timer timer_;
  std::unique_ptr<idempotency::ReplyReader> reader_;
  std::array<char, 16 * 1024> buffer_;
};

}  // namespace sluice::fleet
