#pragma once
// Exactly-once at the edge (docs/idempotency.md). A Guard is one upstream's idempotency policy
// as one config snapshot sees it, over a store and counters that survive reloads. A Ticket is
// one keyed request's passage through it:
//
//   make()    the request carries the key and the policy applies (else nullptr: no cost beyond
//             one header lookup, no allocation, no lock)
//   begin()   claim the key, or find the first execution's answer (replay), or wait for it
//             (collapse), or refuse (mismatch, conflict, store down with on_store_error = reject)
//   capture_head() / capture_body()   the origin's answer as it is relayed to the client
//   finish()  keep the answer (or release the claim), in line for memory, in the background for
//             Redis
//
// A Guard is immutable and shared by the workers; a Ticket belongs to one session on one worker.
#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "sluice/core/per_worker.hpp"
#include "sluice/config/config.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/http/message.hpp"
#include "sluice/config/idempotency.hpp"
#include "sluice/idempotency/fingerprint.hpp"
#include "sluice/idempotency/store.hpp"

namespace sluice::http {
class ResponseHead;  // head_index.hpp
class RequestHead;
}

namespace sluice::idempotency {

enum class Outcome : std::uint8_t {
  none,         // not decided yet
  first,        // claimed: forwarded, the first execution
  collapsed,    // waited for a concurrent first execution, got its answer
  replayed,     // the stored answer of an earlier execution
  conflict,     // 409: still in flight past `wait`, or executed but its answer not stored
  mismatch,     // 422: the key was used with another request
  store_error,  // the store failed: forwarded unprotected, or 503 (on_store_error)
  too_large,    // 413: the body exceeds what sluice buffers for the fingerprint
};
inline constexpr std::size_t outcome_count = 8;
std::string_view to_string(Outcome o);
std::string_view to_string(Mode m);

// What survives reloads: the store and the counters (per worker, written by that worker only).
struct Backing {
  std::shared_ptr<Store> store;
  std::string store_name;  // "memory" or the redis URL, for /api/status
  // Each worker's counts on their own cache line (core/per_worker.hpp): no line shared between
  // workers counting keyed requests.
  PerWorker<std::array<std::atomic<std::uint64_t>, outcome_count>> counts;
  void count(unsigned worker, Outcome o) noexcept { add_own(counts[worker][static_cast<std::size_t>(o)]); }
  std::uint64_t total(Outcome o) const noexcept;
};

class Guard {
public:
  Guard(const config::UpstreamConfig& upstream, std::shared_ptr<Backing> backing, const Clock& clock);

  const Config& config() const noexcept { return config_; }
  const std::string& upstream() const noexcept { return upstream_; }
  std::string_view header() const noexcept { return header_; }
  Backing& backing() const noexcept { return *backing_; }
  const std::shared_ptr<Backing>& shared_backing() const noexcept { return backing_; }
  const Clock& clock() const noexcept { return clock_; }
  // How long a claim outlives an instance that died holding it: the upstream's whole request
  // deadline plus `wait`.
  Clock::duration claim_ttl() const noexcept { return claim_ttl_; }

private:
  std::string upstream_;
  Config config_;
  std::string header_;
  Clock::duration claim_ttl_;
  std::shared_ptr<Backing> backing_;
  const Clock& clock_;
};

// Control thread (snapshot build): the upstream's guard, nullptr when mode = "off". The store is
// shared with the previous snapshot's guard when upstream, store, memory_limit and
// store_timeout are unchanged. Throws std::runtime_error (a redis host that does not resolve).
std::shared_ptr<const Guard> make_guard(const config::UpstreamConfig& upstream, const Clock& clock);

class Ticket {
public:
  // nullptr unless `guard` is set, the request carries its key and may be guarded (not HEAD,
  // not an upgrade).
  static std::unique_ptr<Ticket> make(const std::shared_ptr<const Guard>& guard, const http::RequestHead& head,
                                      boost::beast::http::verb method, bool upgrade);

  enum class Verdict { forward, answered };
  // Claims the key or decides the answer. `body` is the whole request body (the caller checked
  // it fits: else refuse_too_large()). `scope_ip` is the client's address (scope "client_ip").
  // `closed`: the client connection went away (stops a wait). After `answered`, response()
  // holds the complete answer to write.
  boost::asio::awaitable<Verdict> begin(unsigned worker, const http::RequestHead& head,
                                        std::string_view method, std::string_view target,
                                        std::string_view body, std::string_view scope_ip,
                                        const bool& closed);
  // The body could not be fingerprinted: 413 (response() holds it).
  void refuse_too_large(unsigned worker);
  // Sets the answer's request id and connection handling; call before writing response().
  // `detail` ([server] error_detail = "full"): a refusal says why in Sluice-Error, a stored answer
  // whose first execution took retries carries its Sluice-Attempts. `date`: the
  // Date written when the answer has none (an IMF-fixdate; empty: none).
  std::string_view response(std::string_view request_id, bool keep_alive, bool detail = true,
                            std::string_view date = {});
  unsigned status() const noexcept { return status_; }
  // The Sluice-Error of a refusal (static storage), "" for a replayed answer.
  std::string_view refusal() const noexcept;
  bool keeps_connection() const noexcept { return outcome_ != Outcome::too_large; }

  // The origin's answer as it is relayed: its indexed head, less what the response splice drops
  // (hop-by-hop lines, Sluice-*, framing on a 1xx, 204 or 304), with the tries it took
  // (`attempts` > 1: the answer's Sluice-Attempts, repeated by its replays), each body piece,
  // and its end (the whole body reached the client).
  void capture_head(const http::ResponseHead& head, unsigned attempts = 1);
  void capture_body(std::string_view piece);
  void capture_end() noexcept { captured_all_ = true; }
  // The exchange ended with `status`. An answer the origin gave whole and store_statuses lists
  // is kept (or, over max_stored_body or cut short, remembered as executed but not stored);
  // anything else (sluice's own error, a status not listed) releases the claim, so that the
  // client may try again.
  void finish(unsigned worker, const boost::asio::any_io_executor& ex, unsigned status);

  Outcome outcome() const noexcept { return outcome_; }

  Ticket(std::shared_ptr<const Guard> guard, std::string_view key);
  ~Ticket();

private:
  // The store key: upstream, scope values (`scope_ip`, header values), the client's key.
  void set_store_key(const http::RequestHead& head, std::string_view scope_ip);
  boost::asio::awaitable<Verdict> claim(unsigned worker, std::string_view method, std::string_view target,
                                        std::string_view body, const bool& closed);
  enum class Step { claimed, answered, retry, wait };
  Step decide(std::string_view value, bool waited);
  void start_head(unsigned status);  // the status line, into head_
  void answer_stored(unsigned status, std::string_view fields, std::string_view body, Outcome o);
  void problem(unsigned status, std::string_view title, std::string_view detail,
               unsigned retry_after = 0);
  void store_failed(unsigned worker);

  std::shared_ptr<const Guard> guard_;
  std::string key_header_;   // the client's key (copied: the head's memory is reused)
  std::string store_key_;
  std::string pending_;      // our claim's value
  Digest fingerprint_{};
  Outcome outcome_ = Outcome::none;
  bool claimed_ = false;
  bool too_big_ = false;
  bool captured_head_ = false;
  bool captured_all_ = false;
  unsigned status_ = 0;
  std::string head_;         // the answer: head so far (response()), or the captured fields
  std::string body_;         // the answer's body: stored, or captured
  std::string out_;          // response(): what the client gets
  std::string attempts_;     // a stored answer's Sluice-Attempts value, "" for one try
};

}  // namespace sluice::idempotency
