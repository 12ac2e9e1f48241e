#pragma once
// Command line of sluice-origin. Parsed once at start-up; errors are exceptions, caught in main.

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace sluice::origin {

struct options {
  boost::asio::ip::tcp::endpoint listen;
  std::string name;
  unsigned threads = 1;
  std::optional<std::chrono::milliseconds> idle_timeout;
  std::string exec_log;         // "" = no execution log
  std::uint64_t fail_every = 0;  // 0 = never cut a response
  std::uint64_t slow_percent = 0;  // --slow PERCENT:MS; 0 = no answer slowed
  std::uint64_t slow_ms = 0;
  bool help = false;
};

extern const char* const usage;

// Throws std::invalid_argument with a message naming the offending argument.
options parse_options(int argc, char** argv);

// "127.0.0.1:8080", "[::1]:8080" or "::1:8080"; port 0 asks for an ephemeral port.
boost::asio::ip::tcp::endpoint parse_endpoint(const std::string& text);

// How the origin reports its address: IPv6 in brackets, so the port is unambiguous.
std::string format_endpoint(const boost::asio::ip::tcp::endpoint& endpoint);

}  // namespace sluice::origin
