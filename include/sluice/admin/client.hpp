#pragma once
// A small blocking HTTP/1.1 client for the admin API, used by the CLI (`sluice reload`, `drain`,
// `undrain`). Each call runs a private io_context until the exchange completes or the timeout
// expires. The connection is kept alive between calls (`drain --wait` polls every 100 ms on one
// connection); a kept connection the server closed while idle is detected when the next request
// gets no response byte, and the request is sent once more on a fresh connection.
//
// Not thread-safe: one thread uses a Client. Not for the data path (it blocks).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/system/result.hpp>

#include "sluice/config/config.hpp"

namespace sluice::admin {

struct ClientResponse {
  unsigned status = 0;
  std::string content_type;
  std::string config_source;  // GET /api/config: the running config's file name
  std::string body;
};

class Client {
public:
  // `token` = "": no Authorization header; otherwise `Authorization: Bearer <token>` on every
  // request. `timeout` bounds each call as a whole: resolve, connect, write and read.
  Client(config::HostPort address, std::string token, std::chrono::milliseconds timeout);
  ~Client();

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // An error_code when the server could not be reached or did not answer within the timeout
  // (beast::error::timeout), or the answer was not HTTP; any HTTP status is a response.
  boost::system::result<ClientResponse> get(std::string_view target);
  boost::system::result<ClientResponse> post(std::string_view target);

  const config::HostPort& address() const { return address_; }

private:
  struct Connection;
  boost::system::result<ClientResponse> request(bool post, std::string_view target);

  config::HostPort address_;
  std::string token_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Connection> connection_;
};

// One server's entry in a GET /api/status document:
//   {"upstreams":[{"name":U, "servers":[{"identity":S, "in_flight":N, "draining":B, ...}]}]}
// In fleet mode a draining server also has "fleet_in_flight" (the fleet's requests in flight
// there, which then is `in_flight`) and "fleet_unconfirmed" (instances that have not applied the
// drain yet).
struct ServerStatus {
  bool found = false;  // false: no such upstream or server in the document
  std::uint64_t in_flight = 0;
  bool draining = false;
  std::uint64_t unconfirmed = 0;
};

// nullopt when the document is not of that shape (*error says what is wrong).
std::optional<ServerStatus> find_server_status(std::string_view status_json,
                                               std::string_view upstream, std::string_view server,
                                               std::string* error = nullptr);

// `sluice status`: a GET /api/status document as a few lines for a terminal, one per upstream
// ("upstream app (round_robin): 2/3 servers up") and one per server (identity, address, state
// with its reason, in flight, requests, failures). A server is up when it takes new requests: not
// draining, and its health state up or slow_start (no health state: up). nullopt when the
// document is not of that shape (*error says what is wrong).
std::optional<std::string> status_summary(std::string_view status_json, std::string* error = nullptr);

// Percent-encodes one path segment: everything but RFC 3986 unreserved characters
// (ALPHA / DIGIT / "-" / "." / "_" / "~"), so "127.0.0.1:9001" becomes "127.0.0.1%3A9001".
std::string encode_path_segment(std::string_view segment);

}  // namespace sluice::admin
