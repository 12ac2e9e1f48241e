#include "options.hpp"

#include <cmath>
#include <stdexcept>
#include <string_view>

#include "knobs.hpp"

namespace sluice::origin {

const char* const usage =
    "usage: sluice-origin --listen ADDR:PORT --name NAME [--threads N] [--idle-timeout SECONDS]\n"
    "                     [--exec-log PATH] [--fail-every N] [--slow PERCENT:MS]\n"
    "  ADDR is an IP address (127.0.0.1, ::1 or [::1]); PORT 0 picks a free port.\n"
    "  Prints 'listening ADDR:PORT' once bound. See docs/origin.md for the request knobs.\n";

boost::asio::ip::tcp::endpoint parse_endpoint(const std::string& text) {
  std::string host;
  std::string port;
  if (text.starts_with('[')) {
    const auto close = text.find("]:");
    if (close == std::string::npos)
      throw std::invalid_argument("--listen: expected [ADDR]:PORT, got '" + text + "'");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos)
      throw std::invalid_argument("--listen: expected ADDR:PORT, got '" + text + "'");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(host, ec);
  if (ec) throw std::invalid_argument("--listen: '" + host + "' is not an IP address");
  const auto number = parse_decimal(port);
  if (!number || *number > 65535)
    throw std::invalid_argument("--listen: '" + port + "' is not a port");
  return {address, static_cast<unsigned short>(*number)};
}

std::string format_endpoint(const boost::asio::ip::tcp::endpoint& endpoint) {
  const auto address = endpoint.address().to_string();
  const auto port = std::to_string(endpoint.port());
  return endpoint.address().is_v6() ? "[" + address + "]:" + port : address + ":" + port;
}

options parse_options(int argc, char** argv) {
  options o;
  bool have_listen = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      return o;
    }
    if (i + 1 >= argc) throw std::invalid_argument(std::string(arg) + ": missing value");
    const std::string value = argv[++i];
    if (arg == "--listen") {
      o.listen = parse_endpoint(value);
      have_listen = true;
    } else if (arg == "--name") {
      // The name goes verbatim into a header field value (RFC 9110 §5.5): visible ASCII and
      // inner spaces only, so that no name can break the response framing.
      if (value.empty()) throw std::invalid_argument("--name: must not be empty");
      for (const char c : value)
        if (c < 0x20 || c > 0x7e)
          throw std::invalid_argument("--name: only printable ASCII is allowed");
      if (value.front() == ' ' || value.back() == ' ')
        throw std::invalid_argument("--name: no leading or trailing spaces");
      o.name = value;
    } else if (arg == "--threads") {
      const auto n = parse_decimal(value);
      if (!n || *n < 1 || *n > 256)
        throw std::invalid_argument("--threads: expected 1..256, got '" + value + "'");
      o.threads = static_cast<unsigned>(*n);
    } else if (arg == "--idle-timeout") {
      // Seconds, fractions allowed: tests of stale pooled connections want sub-second values.
      std::size_t used = 0;
      double seconds = -1;
      try {
        seconds = std::stod(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != value.size() || !std::isfinite(seconds) || seconds <= 0 || seconds > 86400)
        throw std::invalid_argument("--idle-timeout: expected seconds > 0, got '" + value + "'");
      o.idle_timeout =
          std::chrono::milliseconds(std::max<long long>(1, std::llround(seconds * 1000)));
    } else if (arg == "--exec-log") {
      if (value.empty()) throw std::invalid_argument("--exec-log: expected a file name");
      o.exec_log = value;
    } else if (arg == "--fail-every") {
      const auto n = parse_decimal(value);
      if (!n || *n < 1) throw std::invalid_argument("--fail-every: expected N >= 1, got '" + value + "'");
      o.fail_every = *n;
    } else if (arg == "--slow") {
      const auto colon = value.find(':');
      const auto percent = parse_decimal(value.substr(0, colon));
      const auto ms = colon == std::string::npos ? std::nullopt : parse_decimal(value.substr(colon + 1));
      if (!percent || !ms || *percent > 100 || *ms > 86'400'000)
        throw std::invalid_argument("--slow: expected PERCENT:MS (0..100, milliseconds <= 1 day), got '" + value + "'");
      o.slow_percent = *percent;
      o.slow_ms = *ms;
    } else {
      throw std::invalid_argument("unknown argument '" + std::string(arg) + "'");
    }
  }
  if (!have_listen) throw std::invalid_argument("--listen is required");
  if (o.name.empty()) throw std::invalid_argument("--name is required");
  return o;
}

}  // namespace sluice::origin
