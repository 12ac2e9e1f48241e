#pragma once
// OCSP stapling, the protocol part (RFC 6960, RFC 6066 §8): which responder a listener
// certificate names, the request for its status, the checks a response must pass before it may be
// stapled, and when to fetch it again. No I/O and no clock of its own: every time is passed in
// (seconds since the epoch, UTC, the unit thisUpdate and nextUpdate are written in), so that the
// freshness rules and the schedule are unit-tested on a manual clock. The fetching is
// tls/ocsp_stapler.hpp's; control thread only.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <openssl/types.h>

namespace sluice::tls::ocsp {

using UnixTime = std::int64_t;  // seconds since the epoch, UTC

// An http:// responder URL split for the client. https:// responders are not supported: OCSP
// responses are signed, so plain HTTP is what CAs publish (RFC 6960 §A.1, CA/B Baseline §4.10).
struct HttpUrl {
  std::string host;    // without brackets for an IPv6 literal
  std::string port;    // "80" when the URL has none
  std::string target;  // path and query, "/" when empty
};
// nullopt, with `why`, for anything but an http:// URL with a host.
std::optional<HttpUrl> parse_http_url(std::string_view url, std::string* why = nullptr);

// The first http:// OCSP responder in the certificate's Authority Information Access
// (RFC 5280 §4.2.2.1); "" when it has none.
std::string responder_url(X509* leaf);

enum class CertStatus { good, revoked, unknown };
const char* status_name(CertStatus status);

// A response that passed verify(): its DER bytes (what is stapled) and what it says.
struct Response {
  std::string der;
  CertStatus status = CertStatus::unknown;
  UnixTime this_update = 0;
  std::optional<UnixTime> next_update;  // absent: "newer information is always available"
  // The last second it may be stapled: nextUpdate, else thisUpdate + max_age_without_next_update.
  UnixTime expires() const noexcept;
};

// A response without nextUpdate is stapled for a day after its thisUpdate at most (and fetched
// again every hour).
inline constexpr UnixTime max_age_without_next_update = 24 * 3600;
// Clock skew allowed between the responder and this host for thisUpdate (as OpenSSL's
// OCSP_check_validity callers use: five minutes).
inline constexpr UnixTime allowed_skew = 300;

// A stapled answer is never expired: checked in the handshake as well as at fetch time.
inline bool stapleable(const Response& r, UnixTime now) noexcept { return now < r.expires(); }

// One listener certificate whose status is asked for: the leaf, its issuer (the next certificate
// of the chain file) and the responder. Immutable; read by the control thread only.
class Subject {
public:
  // The leaf and issuer of a PEM chain file, and the responder (`responder_override` when not
  // empty, else the leaf's AIA). nullopt with `why` when the file has no issuer after the leaf or
  // no responder is known.
  static std::optional<Subject> from_chain_file(const std::string& cert_file,
                                                const std::string& responder_override,
                                                std::string& why);
  Subject(X509* leaf, X509* issuer, std::string responder);  // takes a reference to each
  ~Subject();
  Subject(Subject&& other) noexcept;
  Subject& operator=(Subject&&) = delete;
  Subject(const Subject&) = delete;

  const std::string& responder() const noexcept { return responder_; }
  // What identifies the certificate across reloads: the leaf's SHA-256 and the responder.
  std::string identity() const;
  // The DER OCSPRequest for the leaf (RFC 6960 §4.1; SHA-1 CertID, as responders expect; no
  // nonce: CAs pre-sign their responses and ignore it).
  std::string request() const;
  // `der` checked as a response about this leaf: successful, signed by the issuer or a responder
  // it delegated to (RFC 6960 §4.2.2.2), carrying this leaf's status, thisUpdate not in the future
  // (beyond allowed_skew) and nextUpdate, when present, still ahead of `now`. Else the reason.
  std::variant<Response, std::string> verify(std::string_view der, UnixTime now) const;

private:
  X509* leaf_;
  X509* issuer_;
  std::string responder_;
};

// The schedule: when the next fetch is due, in seconds from `now`.
// After a usable response: half of the time left to its nextUpdate (an hour without one), at
// most a day, and never sooner than min_refresh (a responder with very short-lived answers is not
// hammered).
inline constexpr UnixTime min_refresh = 10;
inline constexpr UnixTime refresh_without_next_update = 3600;
inline constexpr UnixTime max_refresh = 24 * 3600;
UnixTime refresh_after(const Response& r, UnixTime now) noexcept;
// After the `failures`-th failure in a row (1, 2, ...): 5 s doubling up to 10 minutes, and never
// later than the middle of what the current staple (if any) has left, so that a staple about to
// expire is retried sooner.
inline constexpr UnixTime first_retry = 5;
inline constexpr UnixTime max_retry = 600;
UnixTime retry_after(unsigned failures, const Response* current, UnixTime now) noexcept;

}  // namespace sluice::tls::ocsp
