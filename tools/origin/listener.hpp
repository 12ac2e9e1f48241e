#pragma once
// The listening socket. It lives on the first worker and hands accepted connections to the
// workers in turn, so `--threads N` needs no SO_REUSEPORT group and port 0 binds once.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <vector>

namespace sluice::origin {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

class worker;

class listener {
 public:
  // Binds and listens at once, so that the caller can report the real port; throws
  // boost::system::system_error when it cannot (start-up only).
  listener(std::vector<std::unique_ptr<worker>>& workers, const tcp::endpoint& endpoint);

  tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }

  // Starts accepting on the first worker's thread.
  void start();

 private:
  asio::awaitable<void> accept_loop();

  std::vector<std::unique_ptr<worker>>& workers_;
  tcp::acceptor acceptor_;
};

}  // namespace sluice::origin
