#pragma once
// A downstream (client) connection: reads requests strictly, routes them, forwards each over a
// pooled upstream connection, streams the response back, and loops for keep-alive and pipelining
// (answers leave in request order because one request is handled at a time).
//
// Lives on one worker for its whole life; owned by the coroutine running run(). Not thread-safe:
// only the worker's thread touches it (including close_if_idle()/close() at shutdown).
#include <array>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "sluice/proxy/error_response.hpp"
#include "sluice/proxy/worker_context.hpp"

namespace sluice::proxy {

class Session final : public SessionLink {
public:
  Session(WorkerContext& worker, boost::asio::ip::tcp::socket socket);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  boost::asio::awaitable<void> run();

  void close_if_idle() override;
  void close() override;

private:
  enum class HeadResult { ok, closed, error };
  struct Exchange;  // per-request state, defined in session.cpp

  boost::asio::awaitable<HeadResult> read_request_head(ProxyError& error);
  boost::asio::awaitable<bool> handle_request(Exchange& x);
  boost::asio::awaitable<bool> forward(Exchange& x);
  boost::asio::awaitable<void> send_error(Exchange* x, const ProxyError& error);
  void log_exchange(const Exchange& x);

  WorkerContext& worker_;
  boost::beast::tcp_stream client_;
  std::string client_ip_;
  boost::beast::flat_buffer in_;     // bytes from the client not yet parsed
  boost::beast::flat_buffer up_in_;  // bytes from the origin not yet parsed
  std::optional<boost::beast::http::request_parser<boost::beast::http::buffer_body>> request_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::buffer_body>> response_;
  std::unique_ptr<char[]> relay_;  // body relay buffer, shared by both directions
  std::shared_ptr<const Snapshot> snapshot_;
  bool first_request_ = true;
  bool idle_ = false;  // waiting for the first byte of a next request
  bool closed_ = false;
};

}  // namespace sluice::proxy
