#pragma once
// WebSocket modes of sluice-test-client (Beast websocket::stream over plain TCP).
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/json/object.hpp>

namespace sluice::client {

struct WebSocketTarget {
  std::string host;  // for the Host header
  std::string port;
  std::string target;
  std::vector<std::string> headers;  // extra handshake headers, "Name: value"
};

// Handshake, then `messages` messages written while their echoes are read (full duplex), each
// echo compared with what was sent (size, content, text/binary), then a close handshake.
// `ok` when the switch happened and every echo matched.
boost::json::object run_websocket(const WebSocketTarget& t, std::uint64_t messages,
                                  boost::asio::io_context& io,
                                  const boost::asio::ip::tcp::resolver::results_type& where,
                                  std::atomic<std::uint64_t>& progress, bool& ok);

// Handshake (one JSON line), then commands from stdin, one JSON line each on stdout:
//   echo N      N messages, one at a time, each echo checked -> {"echoed":N,"ok":true}
//   wait-close  read until the connection ends -> {"closed":"<reason>","after_ms":T}
//   close       close handshake -> {"closed":"normal"}
// Ends at EOF on stdin or after the connection ended. Returns the last summary.
boost::json::object run_websocket_script(const WebSocketTarget& t, boost::asio::io_context& io,
                                         const boost::asio::ip::tcp::resolver::results_type& where,
                                         bool& ok);

}  // namespace sluice::client
