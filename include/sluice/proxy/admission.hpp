#pragma once
// Who the client is, and whether a route lets its request in.
//
// resolve_client(): the client address of a request. The connection's address (its peer, or the
// address a PROXY protocol header carried) stands unless it is one of server.trusted_proxies;
// then X-Forwarded-For is walked from its last entry backwards, past every trusted address, and
// the first untrusted one is the client (nginx's real_ip_recursive). All trusted: the first
// entry. A malformed entry stops the walk at the address reached so far (the trusted proxy that
// passed it on), since nothing before it can be believed.
//
// RouteAdmission: a route's deny list, allow list and rate limit, checked in that order after
// routing. Built with the snapshot and shared by every worker; the limiter and the counters are
// carried over by reloads that keep the route (see build_snapshot). Routes without any of them
// have no RouteAdmission at all: nothing is read or written for their requests.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/ip/address.hpp>

#include "sluice/config/config.hpp"
#include "sluice/core/cidr.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/core/per_worker.hpp"
#include "sluice/http/message.hpp"
#include "sluice/balancer/hash_key.hpp"
#include "sluice/proxy/error_response.hpp"
#include "sluice/proxy/rate_limit.hpp"

namespace sluice::proxy {

struct ClientAddress {
  std::string_view text;  // as written (no port, no brackets); points into the request head or `peer`
  boost::asio::ip::address address;
};

// `peer_text` is `peer` as text. Reads X-Forwarded-For only when `peer` is trusted.
ClientAddress resolve_client(const http::RequestHead& head, std::string_view peer_text,
                             const boost::asio::ip::address& peer, const CidrSet& trusted) noexcept;

// One X-Forwarded-For element as an address: "192.0.2.1", "2001:db8::1", "[2001:db8::1]",
// "[2001:db8::1]:443" or "192.0.2.1:80"; `text` gets the address part.
std::optional<boost::asio::ip::address> parse_forwarded_for(std::string_view element,
                                                            std::string_view& text) noexcept;

// Requests a route turned away, by reason, one set per worker (written only when a request is
// refused, by that worker alone: a flood of refused requests writes no line shared by workers).
struct AdmissionCounters {
  std::atomic<std::uint64_t> denied{0};   // 403 by allow/deny
  std::atomic<std::uint64_t> limited{0};  // 429 by rate_limit
};

class RouteAdmission {
public:
  enum class Verdict { pass, forbidden, limited };
  struct Result {
    Verdict verdict = Verdict::pass;
    Clock::duration retry_after{0};
  };

  // `previous`: the same route's admission in the snapshot before, whose counters (always) and
  // limiter (when the rate_limit settings are unchanged) carry over.
  RouteAdmission(const config::RouteConfig& route, const RouteAdmission* previous);

  // True when the route has allow, deny or rate_limit (else no RouteAdmission is built).
  static bool needed(const config::RouteConfig& route) noexcept;

  // `worker`: the calling worker's index, whose counters a refusal bumps.
  Result admit(const ClientAddress& client, const http::RequestHead& head, std::string_view target,
               Clock::time_point now, unsigned worker = 0) const noexcept;

  // For metrics: "HOST/PREFIX" ("/api/" for a route without host).
  const std::string& label() const noexcept { return label_; }
  // Refusals so far, summed over the workers (the control thread, at scrape).
  std::uint64_t denied() const noexcept { return total(&AdmissionCounters::denied); }
  std::uint64_t limited() const noexcept { return total(&AdmissionCounters::limited); }
  const RateLimiter* limiter() const noexcept { return limiter_.get(); }

private:
  std::uint64_t total(std::atomic<std::uint64_t> AdmissionCounters::*field) const noexcept;

  CidrSet allow_;
  CidrSet deny_;
  std::optional<config::RateLimitConfig> rate_;
  HashKey key_{config::HashKeySpec{}};  // the rate limit's key (client_ip without one)
  std::shared_ptr<RateLimiter> limiter_;
  std::shared_ptr<PerWorker<AdmissionCounters>> counters_;  // default_worker_slots slots
  std::string label_;
};

// Retry-After delay-seconds (RFC 9110 §10.2.3): whole seconds, rounded up, at least 1.
unsigned retry_after_seconds(Clock::duration d) noexcept;

// The answer for a request the route's admission turns away (403, 429 with Retry-After), or
// status 0 to let it in; no admission lets every request in.
ProxyError admit_request(const RouteAdmission* admission, const ClientAddress& client,
                         const http::RequestHead& head, std::string_view target, Clock::time_point now,
                         unsigned worker) noexcept;

}  // namespace sluice::proxy
