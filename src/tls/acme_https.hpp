#pragma once
// The ACME client's HTTPS requests to the CA (private to src/tls/acme_*.cpp): one connection per
// request, verified against the order's ca_file (or the system's CAs), each step under a timeout,
// run to completion on the calling thread's own io_context.
#include <functional>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

namespace sluice::tls::acme {

struct Reply {
  unsigned status = 0;
  std::string body;
  std::string location;      // Location
  std::string nonce;         // Replay-Nonce
  std::string retry_after;   // Retry-After, as sent
};

class Https {
public:
  // `running` is asked every tenth of a second while a request is under way: false abandons it
  // (the client is stopping), so that a CA that does not answer never holds up a shutdown.
  Https(const std::string& ca_file, std::function<bool()> running);  // throws std::runtime_error
  // `body` empty with GET and HEAD. Throws std::runtime_error on any transport failure.
  Reply get(const std::string& url, bool head = false);
  Reply post(const std::string& url, const std::string& body, std::string_view content_type);

private:
  Reply exchange(const std::string& url, int verb, const std::string& body, std::string_view content_type);

  boost::asio::io_context io_;
  boost::asio::ssl::context context_;
  std::function<bool()> running_;
};

}  // namespace sluice::tls::acme
