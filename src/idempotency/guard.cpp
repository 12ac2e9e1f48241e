#include "sluice/idempotency/guard.hpp"

#include <map>
#include <mutex>
#include <random>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/status.hpp>
#include <spdlog/spdlog.h>

#include "sluice/core/random.hpp"
#include "sluice/http/head_index.hpp"
#include "sluice/idempotency/memory_store.hpp"
#include "sluice/idempotency/record.hpp"
#include "sluice/idempotency/redis_store.hpp"

namespace sluice::idempotency {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using boost::system::error_code;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);
// In collapse mode an answer is kept this long after it was given, so that every waiter (they
// poll, at most poll_max apart) finds it; replay mode keeps it for replay_window.
constexpr auto collapse_linger = std::chrono::seconds(5);
constexpr auto poll_first = std::chrono::milliseconds(2);
constexpr auto poll_max = std::chrono::milliseconds(50);
constexpr std::string_view key_prefix = "sluice:idem:";
// The stored fields' last line when the first execution took retries: capture_head() writes it
// after the origin's fields (whose own Sluice-* lines are never kept), answer_stored() splits it
// off, and response() shows it with error_detail = "full" only, as on the first answer. A line
// rather than a field of the record, so that an entry keeps one format across versions sharing a
// Redis.
constexpr std::string_view attempts_line = "Sluice-Attempts: ";

// A claim's token: unique per request across instances (random seed per thread).
std::string new_token() {
  thread_local std::uint64_t state = std::random_device{}() ^ (std::uint64_t{std::random_device{}()} << 32);
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(16, '0');
  auto bits = splitmix64(state);
  for (auto& c : out) {
    c = digits[bits & 0xf];
    bits >>= 4;
  }
  return out;
}

// Fields a replay never repeats: framing and hop-by-hop (RFC 9110 §7.6.1), and what belongs to
// each answer of its own.
bool kept_field(bhttp::field f, std::string_view name) {
  switch (f) {
    case bhttp::field::content_length:
    case bhttp::field::transfer_encoding:
    case bhttp::field::connection:
    case bhttp::field::keep_alive:
    case bhttp::field::proxy_connection:
    case bhttp::field::te:
    case bhttp::field::trailer:
    case bhttp::field::upgrade:
      return false;
    default:
      break;
  }
  return !boost::beast::iequals(name, "x-request-id") && !boost::beast::iequals(name, "idempotent-replayed");
}

// Warnings about the store at most once a second per process: a Redis down under load would
// otherwise log every request.
void warn_store(const Guard& g, std::string_view what, const error_code& ec) {
  static std::atomic<std::int64_t> last{0};
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(steady_clock().now().time_since_epoch()).count();
  auto seen = last.load(std::memory_order_relaxed);
  if (now == seen || !last.compare_exchange_strong(seen, now, std::memory_order_relaxed)) return;
  spdlog::warn("upstream {}: idempotency store {} failed ({}): {}", g.upstream(), what,
               ec.message(), g.config().on_store_error == OnStoreError::forward
                                 ? "requests go to the origin unprotected"
                                 : "requests are refused with 503");
}

// Redis: the answer is written after the exchange, without holding the session.
net::awaitable<void> write_back(std::shared_ptr<const Guard> guard, unsigned worker, std::string key,
                                std::string value, std::string pending, Clock::duration ttl) {
  auto& store = *guard->backing().store;
  boost::system::error_code ec;  // no co_await inside ?: (GCC 12 miscompiles it; downstream_session.cpp)
  if (value.empty()) {
    ec = co_await store.remove_if(worker, key, pending);
  } else {
    ec = co_await store.put(worker, key, value, ttl);
  }
  if (ec) {
    guard->backing().count(worker, Outcome::store_error);
    warn_store(*guard, value.empty() ? "release" : "write", ec);
  }
}

}  // namespace

std::string_view to_string(Outcome o) {
  static constexpr std::array<std::string_view, outcome_count> names{
      "none", "first", "collapsed", "replayed", "conflict", "mismatch", "store_error", "too_large"};
  return names[static_cast<std::size_t>(o)];
}

std::string_view to_string(Mode m) {
  return m == Mode::off ? "off" : m == Mode::collapse ? "collapse" : "replay";
}

std::uint64_t Backing::total(Outcome o) const noexcept {
  std::uint64_t sum = 0;
  counts.for_each([&](const auto& slot) { sum += slot[static_cast<std::size_t>(o)].load(std::memory_order_relaxed); });
  return sum;
}

Guard::Guard(const config::UpstreamConfig& upstream, std::shared_ptr<Backing> backing, const Clock& clock)
    : upstream_(upstream.name),
      config_(upstream.idempotency),
      header_(config_.header.empty() ? upstream.retry.idempotency_header : config_.header),
      backing_(std::move(backing)),
      clock_(clock) {
  const auto& r = upstream.retry;
  const Clock::duration per_try = r.per_try_timeout.count() != 0 ? r.per_try_timeout : upstream.response_timeout;
  const Clock::duration deadline = r.deadline.count() != 0 ? Clock::duration(r.deadline) : per_try * r.attempts;
  claim_ttl_ = deadline + Clock::duration(upstream.connect_timeout) * r.attempts + Clock::duration(config_.wait);
}

std::shared_ptr<const Guard> make_guard(const config::UpstreamConfig& upstream, const Clock& clock) {
  const auto& c = upstream.idempotency;
  if (c.mode == Mode::off) return nullptr;
  // Backings by identity, across reloads; control thread (the mutex covers tests building
  // snapshots from several threads).
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<Backing>> known;
  const auto identity = upstream.name + '\n' + c.store + '\n' + std::to_string(c.memory_limit) + '\n' +
                        std::to_string(c.store_timeout.count());
  const std::lock_guard lock(mutex);
  auto backing = known[identity].lock();
  if (!backing) {
    backing = std::make_shared<Backing>();
    backing->store_name = c.store;
    if (c.redis) backing->store = std::make_shared<RedisStore>(*c.redis, c.store_timeout);
    else backing->store = std::make_shared<MemoryStore>(clock, c.memory_limit);
    known[identity] = backing;
  }
  for (auto it = known.begin(); it != known.end();) it = it->second.expired() ? known.erase(it) : std::next(it);
  return std::make_shared<Guard>(upstream, std::move(backing), clock);
}

std::unique_ptr<Ticket> Ticket::make(const std::shared_ptr<const Guard>& guard, const http::RequestHead& head,
                                     bhttp::verb method, bool upgrade) {
  if (guard == nullptr || upgrade || method == bhttp::verb::head) return nullptr;
  const auto key = head.value(guard->header());
  if (key.empty()) return nullptr;
  return std::make_unique<Ticket>(guard, key);
}

Ticket::Ticket(std::shared_ptr<const Guard> guard, std::string_view key)
    : guard_(std::move(guard)), key_header_(key) {}
Ticket::~Ticket() = default;

void Ticket::set_store_key(const http::RequestHead& head, std::string_view scope_ip) {
  Sha256 h;
  h.part(guard_->upstream());
  for (const auto& s : guard_->config().scope)
    h.part(s.kind == idempotency::ScopePart::Kind::client_ip ? scope_ip : head.value(s.header));
  h.part(key_header_);
  store_key_.assign(key_prefix).append(hex(h.finish()));
}

// Not a coroutine: the key is made before the first suspension, so `head` need not outlive it.
net::awaitable<Ticket::Verdict> Ticket::begin(unsigned worker, const http::RequestHead& head,
                                              std::string_view method, std::string_view target,
                                              std::string_view body, std::string_view scope_ip,
                                              const bool& closed) {
  set_store_key(head, scope_ip);
  return claim(worker, method, target, body, closed);
}

net::awaitable<Ticket::Verdict> Ticket::claim(unsigned worker, std::string_view method, std::string_view target,
                                              std::string_view body, const bool& closed) {
  const auto& config = guard_->config();
  fingerprint_ = fingerprint(method, target, body);
  pending_ = encode_pending(fingerprint_, new_token());
  auto& store = *guard_->backing().store;
  const auto until = guard_->clock().now() + Clock::duration(config.wait);
  bool waited = false;
  // Each round: claim, or meet the value already there; a claim released meanwhile (its answer
  // was not kept) is claimed again. Bounded by `wait` (every round but the first waits).
  for (;;) {
    const auto claim = co_await store.set_if_absent(worker, store_key_, pending_, guard_->claim_ttl());
    if (!claim) {
      store_failed(worker);
      warn_store(*guard_, "claim", claim.error());
      co_return head_.empty() ? Verdict::forward : Verdict::answered;
    }
    auto step = *claim ? decide(**claim, waited) : Step::claimed;
    auto pause = Clock::duration(poll_first);
    while (step == Step::wait) {
      if (closed || guard_->clock().now() + pause > until) {
        problem(409, "A request with this Idempotency-Key is still in progress",
                "the first request with this key has not been answered yet; retry later", 1);
        outcome_ = Outcome::conflict;
        break;
      }
      net::steady_timer timer(co_await net::this_coro::executor, pause);
      co_await timer.async_wait(nothrow);
      pause = std::min<Clock::duration>(pause * 2, poll_max);
      waited = true;
      const auto seen = co_await store.get(worker, store_key_);
      if (!seen) {
        store_failed(worker);
        warn_store(*guard_, "read", seen.error());
        co_return head_.empty() ? Verdict::forward : Verdict::answered;
      }
      step = *seen ? decide(**seen, true) : Step::retry;
    }
    if (step == Step::retry) continue;
    if (step == Step::claimed) {
      claimed_ = true;
      outcome_ = Outcome::first;
    }
    guard_->backing().count(worker, outcome_);
    co_return step == Step::claimed ? Verdict::forward : Verdict::answered;
  }
}

// What the value found under the key means for this request.
Ticket::Step Ticket::decide(std::string_view value, bool waited) {
  const auto entry = decode(value);
  if (!entry || entry->fingerprint != fingerprint_) {
    // The draft's rule (§2.7): a key reused with another request is refused, never forwarded.
    problem(422, "Idempotency-Key reused with a different request",
            "this key was first used with another method, target or body; use a new key for a new request");
    outcome_ = Outcome::mismatch;
    return Step::answered;
  }
  switch (entry->state) {
    case State::pending:
      return entry->token == std::string_view(pending_).substr(1 + fingerprint_.size()) ? Step::claimed
                                                                                       : Step::wait;
    case State::stored:
      answer_stored(entry->status, entry->fields, entry->body, waited ? Outcome::collapsed : Outcome::replayed);
      return Step::answered;
    case State::not_stored:
      problem(409, "The request with this Idempotency-Key was executed; its answer was not kept",
              "the first request with this key was executed, but its answer was larger than "
              "max_stored_body (or was cut short) and cannot be replayed; it is not executed again");
      outcome_ = Outcome::conflict;
      return Step::answered;
  }
  return Step::answered;
}

void Ticket::store_failed(unsigned worker) {
  outcome_ = Outcome::store_error;
  guard_->backing().count(worker, Outcome::store_error);
  if (guard_->config().on_store_error == OnStoreError::reject)
    problem(503, "Idempotency store unavailable",
            "the idempotency store could not be reached in time; retry later", 1);
}

namespace {

// A "Date:" line among the head's fields (after its status line), in any case.
bool has_date(std::string_view head) noexcept {
  for (auto at = head.find("\r\n"); at != std::string_view::npos; at = head.find("\r\n", at + 2)) {
    const auto line = head.substr(at + 2, 5);
    if (line.size() == 5 && line[4] == ':' && (line[0] | 0x20) == 'd' && (line[1] | 0x20) == 'a' &&
        (line[2] | 0x20) == 't' && (line[3] | 0x20) == 'e')
      return true;
  }
  return false;
}

// The value of the Sluice-Attempts line that ends stored `fields` (each line ends with CRLF),
// taken off them; "" when there is none.
std::string_view split_attempts(std::string_view& fields) noexcept {
  if (!fields.ends_with("\r\n")) return {};
  const auto lines = fields.substr(0, fields.size() - 2);
  const auto last = lines.rfind("\r\n");
  const auto from = last == std::string_view::npos ? 0 : last + 2;
  if (!lines.substr(from).starts_with(attempts_line)) return {};
  fields = fields.substr(0, from);
  return lines.substr(from + attempts_line.size());
}

}  // namespace

void Ticket::start_head(unsigned status) {
  status_ = status;
  head_.assign("HTTP/1.1 ").append(std::to_string(status)).append(" ");
  head_.append(bhttp::obsolete_reason(static_cast<bhttp::status>(status))).append("\r\n");
}

void Ticket::answer_stored(unsigned status, std::string_view fields, std::string_view body, Outcome o) {
  outcome_ = o;
  start_head(status);
  attempts_.assign(split_attempts(fields));
  head_.append(fields);
  head_.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  head_.append("Idempotent-Replayed: true\r\n");
  body_.assign(body);
}

void Ticket::refuse_too_large(unsigned worker) {
  problem(413, "Request body too large for an idempotent request",
          "a request with an Idempotency-Key is fingerprinted (method, target, body) before it is "
          "forwarded, and its body exceeds what sluice buffers (64 KiB)");
  outcome_ = Outcome::too_large;
  guard_->backing().count(worker, Outcome::too_large);
}

// An answer of sluice's own, as problem details (RFC 9457).
void Ticket::problem(unsigned status, std::string_view title, std::string_view detail,
                     unsigned retry_after) {
  body_.assign(R"({"type":"about:blank","title":")").append(title);
  body_.append(R"(","status":)").append(std::to_string(status));
  body_.append(R"(,"detail":")").append(detail).append("\"}");
  start_head(status);
  head_.append("Content-Type: application/problem+json\r\n");
  if (retry_after != 0) head_.append("Retry-After: ").append(std::to_string(retry_after)).append("\r\n");
  head_.append("Content-Length: ").append(std::to_string(body_.size())).append("\r\n");
}

std::string_view Ticket::refusal() const noexcept {
  switch (outcome_) {
    case Outcome::conflict: return "idempotency conflict";
    case Outcome::mismatch: return "idempotency mismatch";
    case Outcome::store_error: return "idempotency store_error";
    case Outcome::too_large: return "idempotency too_large";
    default: return {};
  }
}

std::string_view Ticket::response(std::string_view request_id, bool keep_alive, bool detail,
                                  std::string_view date) {
  out_.assign(head_);
  // A stored answer keeps the origin's own Date; sluice's problems and dateless answers get one.
  if (!date.empty() && !has_date(head_)) out_.append("Date: ").append(date).append("\r\n");
  if (const auto why = refusal(); detail && !why.empty()) out_.append("Sluice-Error: ").append(why).append("\r\n");
  if (detail && !attempts_.empty()) out_.append(attempts_line).append(attempts_).append("\r\n");
  if (!request_id.empty()) out_.append("X-Request-Id: ").append(request_id).append("\r\n");
  if (!keep_alive) out_.append("Connection: close\r\n");
  out_.append("\r\n").append(body_);
  return out_;
}

void Ticket::capture_head(const http::ResponseHead& head, unsigned attempts) {
  if (!claimed_) return;
  captured_head_ = true;
  head_.clear();
  for (const auto& f : head.fields()) {
    // Hop-by-hop lines (and those a Connection option names) and Sluice-* never reach the client.
    if (f.hop_by_hop || f.known == http::KnownField::sluice) continue;
    const auto name = head.name(f);
    if (!kept_field(bhttp::string_to_field(name), name)) continue;
    head_.append(name).append(": ").append(head.value(f)).append("\r\n");
  }
  if (attempts > 1) head_.append(attempts_line).append(std::to_string(attempts)).append("\r\n");
}

void Ticket::capture_body(std::string_view piece) {
  if (!claimed_ || too_big_) return;
  if (body_.size() + piece.size() > guard_->config().max_stored_body) {
    too_big_ = true;
    std::string().swap(body_);
    return;
  }
  body_.append(piece);
}

void Ticket::finish(unsigned worker, const net::any_io_executor& ex, unsigned status) {
  if (!claimed_) return;
  claimed_ = false;
  const auto& config = guard_->config();
  std::string value;
  if (captured_head_ && config.stores_status(status)) {
    value = too_big_ || !captured_all_ ? encode_not_stored(fingerprint_, status)
                                       : encode_stored(fingerprint_, status, head_, body_);
  }
  const Clock::duration ttl = config.mode == Mode::replay ? Clock::duration(config.replay_window)
                                                          : Clock::duration(collapse_linger);
  auto& store = guard_->backing().store;
  if (auto* memory = dynamic_cast<MemoryStore*>(store.get())) {
    if (value.empty()) memory->remove_if_now(store_key_, pending_);
    else memory->put_now(store_key_, value, ttl);
    return;
  }
  // The write may outlive this exchange and its snapshot: the coroutine holds what it needs.
  net::co_spawn(ex, write_back(guard_, worker, std::move(store_key_), std::move(value),
                               std::move(pending_), ttl),
                net::detached);
}

}  // namespace sluice::idempotency
