#include "sluice/proxy/session.hpp"

#include <charconv>
#include <cstring>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/static_string/static_string.hpp>
#include <spdlog/spdlog.h>

#include "sluice/http/head.hpp"
#include "sluice/http/intake.hpp"
#include "sluice/http/rewrite.hpp"
#include "sluice/balancer/hash.hpp"
#include "sluice/health/log.hpp"
#include "sluice/idempotency/guard.hpp"
#include "sluice/http/strict.hpp"
#include "sluice/proxy/body_relay.hpp"
#include "sluice/proxy/response_relay.hpp"
#include "sluice/proxy/upstream_attempt.hpp"

namespace sluice::proxy {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);
constexpr std::size_t relay_size = relay_block_size;
constexpr std::size_t read_chunk = head_read_chunk;  // bytes asked of the socket while reading a head
constexpr std::string_view crlf = "\r\n";
// The access log's error for a body that broke off after its head went to the client; compared
// by address in log_exchange() to count it in its own status class.
constexpr std::string_view upstream_body_cut = "upstream body cut";

// Room to read into `buffer` without exceeding its max_size.
template <class Buffer>
net::mutable_buffer prepare_some(Buffer& buffer) {
  const auto room = buffer.max_size() - buffer.size();
  return buffer.prepare(std::min(room, read_chunk));
}

template <class Buffer>
std::string_view view(const Buffer& b) {
  return {static_cast<const char*>(b.data().data()), b.size()};
}

// The endpoint's counter arrays are indexed by these enums (upstream/ cannot include proxy/).
static_assert(std::extent_v<decltype(EndpointCounters::retries)> == failure_kind_count);
static_assert(std::extent_v<decltype(EndpointCounters::retry_skips)> == proxy::retry_skip_count);
static_assert(std::extent_v<decltype(EndpointCounters::tunnels_closed)> ==
              static_cast<std::size_t>(TunnelWatch::Verdict::drained) + 1);

}  // namespace

// Per-request state: lives on run()'s coroutine frame for the duration of one exchange. The attempt
// loop's record (forwarder.hpp) is part of it.
struct Session::Exchange : AttemptRecord {
  Clock::time_point start;
  // The request's id: the client's own (a view into the request head's bytes, which stay in the
  // arena until the exchange ends), or one generated into generated_id.
  char generated_id[37];
  std::string_view request_id;
  // The client address (see proxy::resolve_client): a view into X-Forwarded-For (the request
  // head's arena copy, kept until the exchange ends) or into client_ip_.
  std::string_view client_ip;
  const Upstream* upstream = nullptr;
  const Router::Route* route = nullptr;  // its edge rules (docs/edge.md)
  unsigned status = 0;
  unsigned client_version = 11;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  std::string_view error;
  bool client_keep_alive = false;
  bool expect_continue = false;  // the client waits for 100 Continue before sending its body
  bool chunked_in = false;       // the request body is chunked (else Content-Length or none)
  bool head_sent = false;        // response head reached the client: no error page possible
  bool request_done = false;     // the whole request (head and body) was read from the client
  bool body_kept = false;        // the whole body is in relay_ (kept_body bytes), for replay
  bool body_consumed = false;    // streamed body bytes were taken from the client: no replay
  bool upgrade = false;          // forwarded with its Upgrade: a 101 turns it into a tunnel
  bool request_unsent = false;   // the origin answered before the whole request reached it
  // The origin's body failed (after its head arrived): counted against the server (end_delivery()).
  FailureKind body_failure = FailureKind::none;
  std::size_t kept_body = 0;
  // A chunked body kept whole (keep_chunked_body()): the Content-Length it is sent with.
  std::optional<std::uint64_t> kept_length;
  std::optional<std::chrono::seconds> origin_idle_timeout;  // from the response's Keep-Alive
  std::unique_ptr<idempotency::Ticket> idem;  // set when the request's Idempotency-Key is guarded
};

Session::Session(WorkerContext& worker, tls::Stream client, const boost::asio::ip::address& client_address,
                 std::shared_ptr<tls::ServerContext> tls, bool proxy_protocol)
    : worker_(worker), client_(std::move(client)), tls_(std::move(tls)), proxy_protocol_(proxy_protocol) {
  client_addr_ = unmapped(client_address);
  client_ip_ = ip_text(client_addr_).view();  // IPv4 fits the string's own buffer: no allocation
  head_out_ = worker_.head_strings.take();
  worker_.sessions.push_back(*this);
}

Session::~Session() {
  worker_.head_strings.keep(std::move(head_out_));
  if (is_linked()) worker_.sessions.erase(worker_.sessions.iterator_to(*this));
}

void Session::close_if_idle() {
  if (idle_) close();
}

void Session::close() {
  if (closed_) return;
  error_code ignored;
  client_.shutdown(tcp::socket::shutdown_both, ignored);
  close_streams();
}

void Session::close_streams() noexcept {
  closed_ = true;
  error_code ignored;
  client_.close(ignored);
  if (upstream_ != nullptr) upstream_->close(ignored);
}

void Session::expire() {
  if (parkable_wait_ && worker_.clock.now() < idle_until_) {
    // Idle for park_after: the wait ends and run() hands the connection to the worker's lot.
    parking_ = true;
    deadline = Clock::time_point::max();
    error_code ignored;
    client_.cancel(ignored);
    return;
  }
  if (upload_ != nullptr && upload_->sending && !upload_->reading_client && look_at_drain()) return;
  if (upload_ != nullptr) upload_->expired();
  deadline = Clock::time_point::max();
  timed_out_ = true;
  error_code ignored;
  client_.cancel(ignored);
  if (upstream_ != nullptr) upstream_->cancel(ignored);
}

void Session::expire_after(Clock::duration d) noexcept {
  deadline = worker_.clock.now() + d;
  timed_out_ = false;
}

void Session::arm_idle(Clock::duration idle_timeout) noexcept {
  const auto now = worker_.clock.now();
  idle_until_ = now + idle_timeout;
  deadline = client_.is_tls() ? idle_until_ : std::min(idle_until_, now + park_after);
  timed_out_ = false;
}

ParkedClient Session::take_parked() noexcept {
  parked_ = false;
  closed_ = true;  // the stream is the lot's now
  return {std::move(client_), client_addr_, idle_until_};
}

void Session::resumed() noexcept {
  first_request_ = false;
  proxy_protocol_ = false;  // read before it was parked
}

error_code Session::timed(error_code ec) const noexcept {
  return ec == net::error::operation_aborted && timed_out_ ? error_code(beast::error::timeout) : ec;
}

void Session::begin_exchange_memory() {
  if (!arena_.attached()) arena_.attach(worker_.arena_blocks.acquire(), arena_block_size);
}

void Session::end_exchange_memory() {
  // The indexes and parsers first: they live in the arena.
  static_assert(std::is_trivially_destructible_v<http::RequestHead>);
  request_ = nullptr;
  if (request_bytes_ != nullptr) arena_.deallocate(std::exchange(request_bytes_, nullptr), 1);
  if (request_store_ != nullptr) {
    arena_.deallocate(request_store_, alignof(http::RequestHead));  // a no-op inside the block
    request_store_ = nullptr;
  }
  forget_response();
  if (response_store_ != nullptr) {
    static_assert(std::is_trivially_destructible_v<http::ResponseHead>);
    arena_.deallocate(response_store_, alignof(http::ResponseHead));  // a no-op inside the block
    response_store_ = nullptr;
  }
  if (up_in_.size() == 0) up_in_.shrink_to_fit();
  worker_.arena_blocks.release(arena_.detach());
  worker_.relay_blocks.release(std::exchange(relay_, nullptr));
}

net::awaitable<void> Session::run() {
  // The head buffers are bounded: a peer cannot make us hold more than a head plus one read.
  // (A value, not a reference into the worker's snapshot: a reload may free that one while this
  // coroutine is suspended.)
  const std::size_t max_header = worker_.snapshot->config->server.max_header_bytes;
  const PoolAllocator<char> blocks(&worker_.head_blocks);
  in_ = HeadBuffer(max_header + read_chunk, blocks);
  up_in_ = HeadBuffer(max_header + read_chunk, blocks);
  // No co_await inside && or ||: GCC 12 miscompiles it (this one ran read_proxy_header() on
  // every connection, proxy_protocol or not; a two-line reproduction traps).
  bool ready = true;
  if (proxy_protocol_) ready = co_await read_proxy_header();
  if (ready && client_.is_tls()) ready = co_await tls_handshake();
  if (!ready) {
    deadline = Clock::time_point::max();
    close();
    co_return;
  }
  bool nothing_unread = false;  // the last exchange's client asked to close and was read to the end
  while (!closed_) {
    ProxyError error;
    const auto head = co_await read_request_head(error);
    if (head == HeadResult::closed) break;
    if (head == HeadResult::parked) {
      // Not at shutdown: graceful shutdown closes idle connections instead.
      parked_ = !closed_ && !worker_.is_stopping();
      break;
    }
    if (head == HeadResult::error) {
      co_await send_error(nullptr, error);
      break;
    }
    Exchange x;
    x.start = worker_.clock.now();
    const bool keep = co_await handle_request(x);
    // Nothing more can come from a client that asked to close and was read to the end.
    nothing_unread = !request_->keep_alive() && x.request_done && in_.size() == 0;
    if (!tunnel_) log_exchange(x);  // else the tunnel logs it when it closes
    end_exchange_memory();
    if (!keep || worker_.is_stopping()) break;
  }
  end_exchange_memory();
  if (parked_ || tunnel_) {
    deadline = Clock::time_point::max();
    co_return;  // the worker parks the connection (take_parked()) or starts its tunnel
  }
  if (client_.is_tls() && !closed_) {
    // close_notify before the FIN (RFC 8446 §6.1): a close-delimited body must not look
    // truncated. Bounded: a peer that never answers with its own costs at most a second.
    expire_after(std::chrono::seconds(1));
    co_await client_.async_tls_shutdown(nothrow);
  }
  end_connection(nothing_unread);
}

void Session::end_connection(bool nothing_unread) noexcept {
  deadline = Clock::time_point::max();
  if (closed_) return;
  // Half-close so that a client still sending (a body we refused, a request after the one we
  // answered with Connection: close) sees our answer, not a reset. A client that asked to close
  // and was read to the end sends nothing more: its close sends the FIN (nginx's rule for its
  // lingering close), one system call less per such connection.
  error_code ignored;
  if (!nothing_unread) client_.shutdown(tcp::socket::shutdown_send, ignored);
  close_streams();
}

// The limits are copied, not referenced: before its first request a connection holds no
// snapshot, and a reload while it waits for bytes frees the worker's old one (ThreadSanitizer
// caught a read through a reference into it during 50 reloads under load).
Session::HeadLimits Session::head_limits() const noexcept {
  const auto& server = snapshot_ ? snapshot_->config->server : worker_.snapshot->config->server;
  return HeadLimits{server.header_timeout, server.idle_timeout, server.max_header_bytes,
                    server.max_uri_bytes};
}

http::RequestHead& Session::request_index() {
  if (request_store_ == nullptr) {
    request_store_ = new (arena_.allocate(sizeof(http::RequestHead), alignof(http::RequestHead)))
        http::RequestHead;
  }
  return *request_store_;
}

// A complete head (or one admit_request() refuses): the request runs on the newest config, its
// index rebased onto a copy of its bytes in the arena, as body reads may move in_'s. (The copy
// costs a memcpy of the head; keeping the bytes in place would tie every body read to the index.)
HeadResult Session::start_request(const http::HeadVerdict& verdict) {
  idle_ = false;
  snapshot_ = worker_.snapshot;
  auto& head = request_index();
  const auto bytes = view(in_).substr(verdict.head_start, verdict.head_size);
  request_bytes_ = static_cast<char*>(arena_.allocate(bytes.size(), 1));
  std::memcpy(request_bytes_, bytes.data(), bytes.size());
  head.rebase({request_bytes_, bytes.size()});
  in_.consume(verdict.head_start + verdict.head_size);
  request_ = &head;
  refused_ = verdict.admission ? ProxyError{verdict.rejection.status, verdict.rejection.reason} : ProxyError{};
  return HeadResult::ok;
}

// The bytes buffered so far: a head that has its end is indexed (in the arena, for the config
// the request will run on: start_request()); one that has not is only scanned for a violation,
// so that a client sending its head slowly holds no arena block (the `bursts` benchmark's
// thousand partial heads). nullopt: more bytes are needed.
std::optional<HeadResult> Session::look_at_head(const HeadLimits& limits, ProxyError& error) {
  const auto buffered = view(in_);
  if (buffered.find("\r\n\r\n", http::empty_lines_before(buffered)) == std::string_view::npos) {
    const auto step = http::next_head(buffered, limits.max_header_bytes, limits.max_uri_bytes);
    in_.consume(step.skipped);  // the empty lines before a head (RFC 9112 §2.2)
    if (step.scan.result != http::HeadScan::Result::invalid) return std::nullopt;
    error = {http::status_for(step.scan.violation), http::describe(step.scan.violation)};
    return HeadResult::error;
  }
  begin_exchange_memory();
  const auto verdict = http::index_request_head(
      buffered, {limits.max_header_bytes, limits.max_uri_bytes, worker_.snapshot->config->server.max_body_bytes},
      request_index());
  if (verdict.result == http::HeadScan::Result::complete || verdict.admission) return start_request(verdict);
  if (verdict.result == http::HeadScan::Result::invalid) {
    error = {verdict.rejection.status, verdict.rejection.reason};
    return HeadResult::error;
  }
  in_.consume(verdict.head_start);
  return std::nullopt;
}

// read_request_head()'s hooks (request_head.hpp) for the client's next request head: the look at
// the bytes (look_at_head()), the idle and parking state, the deadlines.
struct Session::RequestHooks {
  Session& s;
  HeadLimits limits;
  ProxyError& error;  // run()'s: the answer to a head refused

  std::optional<HeadResult> look() { return s.look_at_head(limits, error); }
  bool idle() const { return s.idle_; }
  bool stopping() const { return s.worker_.is_stopping(); }
  // Only a plain idle connection parks (a TLS one keeps its session: its state is in OpenSSL).
  void waiting(bool plain) { s.parkable_wait_ = s.idle_ && plain; }
  bool woke(error_code ec) {
    s.parkable_wait_ = false;
    const bool park = std::exchange(s.parking_, false);
    if (!ec && s.idle_) s.deadline = s.idle_until_;  // the read that follows is still under idle_timeout
    return ec && park;
  }
  void busy() {
    if (!s.idle_) return;
    s.idle_ = false;
    s.expire_after(limits.header_timeout);
  }
  error_code timed(error_code ec) const { return s.timed(ec); }
  void refuse(const ProxyError& e) { error = e; }
  // read_request_head()'s frame comes from the worker's FramePool, like the session's own.
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<HeadResult>, RequestHooks,
                                                     tls::Stream&, HeadBuffer&>::promise_type,
                               PooledFrame<HeadResult>>);
};

// The client's next request head (proxy::read_request_head()). Idle between requests:
// idle_timeout until the first byte, then header_timeout for the whole head. A new connection
// gets header_timeout from the start (slowloris protection), and is not idle: its client is
// sending its first request, and closing it at shutdown or at a binary upgrade's handover would
// fail a request already on its way. Not a coroutine: the phase's frame is the template's alone.
net::awaitable<HeadResult> Session::read_request_head(ProxyError& error) {
  const HeadLimits limits = head_limits();
  idle_ = in_.size() == 0 && !first_request_;
  if (idle_) {
    arm_idle(limits.idle_timeout);
  } else {
    expire_after(limits.header_timeout);
  }
  first_request_ = false;
  return proxy::read_request_head(RequestHooks{*this, limits, error}, client_, in_);
}

// What the attempt loop (forward_attempts(), forwarder.hpp) asks of the HTTP/1 session: one try
// on a server with the connection it leaves in `upstream`, the answer to the client, sluice's own
// answer, a timer. Every member coroutine it names is the session's (frames from the FramePool).
struct Session::ForwardHooks {
  Session& s;
  Exchange& x;
  std::optional<socket_type> upstream;  // the attempt's connection

  net::awaitable<Failure> attempt(Endpoint& ep, Clock::time_point try_until) {
    return s.try_server(x, ep, upstream, try_until);
  }
  net::awaitable<bool> tunnel(Endpoint& ep) { return s.tunnel(x, ep, upstream); }
  net::awaitable<bool> respond() { return s.send_response(x, *upstream); }
  bool delivered(Endpoint& ep, bool reusable) { return s.end_delivery(x, ep, upstream, reusable); }
  void drop() { s.drop_answer(upstream); }
  net::awaitable<void> fail(const ProxyError& error) { return s.send_error(&x, error); }
  net::awaitable<bool> wait(Clock::duration d) { return s.wait_for(d); }
  bool replayable() const { return x.body_kept || !x.body_consumed; }
  std::string_view retry_after() const {
    return s.response_ != nullptr ? s.response_->value("Retry-After") : std::string_view();
  }
  double uniform() { return s.worker_.uniform(); }
  // forward_attempts()'s frame comes from the worker's FramePool, like the session's own.
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<bool>, ForwardHooks, Forwarder&>::promise_type,
                               PooledFrame<bool>>);
};

net::awaitable<bool> Session::handle_request(Exchange& x) {
  const auto& req = *request_;
  x.request_id = http::choose_request_id(req, worker_.ids, x.generated_id);
  x.client_keep_alive = req.keep_alive();
  x.client_version = req.version();
  x.request_done = req.body_done();

  // 413, CONNECT (501), a bad absolute-form target (400), found by the index (admit_request());
  // an absolute-form target's authority is the host.
  if (refused_.status != 0) {
    co_await send_error(&x, refused_);
    co_return false;
  }
  x.route = snapshot_->router.match(req.host(), http::path_of(req.target()));
  if (x.route == nullptr) {
    co_await send_error(&x, {404, "no route"});
    co_return false;  // error answers close the connection (they say Connection: close)
  }
  x.upstream = x.route->upstream;
  const auto client = client_of(req);
  x.client_ip = client.text;
  // Admission before a route's own answer: deny and rate limits hold for `return` routes too.
  if (const auto refused = admit(x.route->admission, req, req.target(), client); refused.status != 0) {
    co_await send_error(&x, refused);
    co_return false;
  }
  if (x.route->answer) co_return co_await send_fixed_answer(x);
  const auto facts = begin_forward(x);
  auto prepared = Prepared::forward;
  if (prepares_body(x)) prepared = co_await prepare_forward(x);
  bool keep = prepared == Prepared::keep;
  if (prepared == Prepared::forward) {
    Forwarder forwarder(*x.upstream, worker_.clock, worker_.index, facts, pick_context(x), x);
    keep = co_await forward_attempts(ForwardHooks{*this, x, {}}, forwarder);
  }
  if (x.idem) x.idem->finish(worker_.index, worker_.io.get_executor(), x.status);
  co_return keep;
}

// A body kept before the first try (for replay, or validated: chunked), or the Idempotency-Key's
// gate: prepare_forward() has work to do.
bool Session::prepares_body(const Exchange& x) const {
  return keeps_content_body(x) || (!x.request_done && x.chunked_in) || x.idem;
}

// The request's body kept (Content-Length up to the relay block, or chunked and validated), then
// its Idempotency-Key claimed. Anything but `forward` was answered here (or the client is gone).
net::awaitable<Session::Prepared> Session::prepare_forward(Exchange& x) {
  bool ready = true;  // no co_await inside && (GCC 12 miscompiles it, see run())
  if (keeps_content_body(x)) ready = co_await keep_body(x);
  if (ready && !x.request_done && x.chunked_in) ready = co_await keep_chunked_body(x);
  if (!ready) co_return Prepared::close;
  if (x.idem) ready = co_await idempotency_gate(x);
  if (ready) co_return Prepared::forward;
  co_return x.client_keep_alive && x.request_done ? Prepared::keep : Prepared::close;
}

// A wait between tries (backoff) or in the upstream's queue. False: the session was closed
// meanwhile.
net::awaitable<bool> Session::wait_for(Clock::duration d) {
  if (!backoff_timer_) backoff_timer_.emplace(worker_.io);
  backoff_timer_->expires_after(d);
  co_await backoff_timer_->async_wait(nothrow);
  co_return !closed_;
}

// The request's framing, its idempotency ticket and retry facts, and its head rewritten for the
// origin (hop-by-hop removed, X-Forwarded-*, X-Request-Id).
proxy::RequestFacts Session::begin_forward(Exchange& x) {
  const auto& req = *request_;
  const auto& retry = x.upstream->config().retry;
  if (relay_ == nullptr) relay_ = worker_.relay_blocks.acquire();
  // Expect: 100-continue is answered here, hop by hop, when we start reading the body (and is
  // not forwarded: splice_request_head()).
  if (const auto e = req.value(http::KnownField::expect); !e.empty())
    x.expect_continue = beast::iequals(e, "100-continue") && req.version() == 11 && !x.request_done;
  x.chunked_in = req.chunked();
  x.upgrade = http::wants_upgrade(req, !x.request_done);
  x.idem = idempotency::Ticket::make(x.upstream->shared_idempotency(), req, req.verb(), x.upgrade);
  proxy::RequestFacts facts;
  // An Upgrade request is never resent once a byte of it was written: the origin may have
  // switched already. (Connect failures are still retried.)
  facts.idempotent_method = http::is_idempotent(req.verb()) && !x.upgrade;
  facts.has_idempotency_key = !retry.idempotency_header.empty() && !x.upgrade &&
                              req.count(retry.idempotency_header) != 0;
  return facts;
}

// A Content-Length body up to `buffer` (and the relay block) is read before the first try and
// kept for replay; a larger or chunked body streams, and can only be resent if none of it was
// consumed yet. A guarded keyed body is kept too: its fingerprint needs all of it before
// forwarding.
bool Session::keeps_content_body(const Exchange& x) const {
  const auto& retry = x.upstream->config().retry;
  if (x.request_done || x.chunked_in || (retry.attempts <= 1 && !x.idem)) return false;
  const auto limit = x.idem ? relay_size : std::min<std::uint64_t>(retry.buffer, relay_size);
  return request_->content_length().value_or(limit + 1) <= limit;
}

// The balancer's context of this request: the hash of its key, for hash upstreams.
PickContext Session::pick_context(const Exchange& x) const {
  PickContext ctx;
  if (const auto& key = x.upstream->hash_key()) {
    if (const auto bytes = key->extract(*request_, request_->target(), x.client_ip)) {
      ctx.hash = hash_key_bytes(*bytes);
      ctx.has_hash = true;
    }
  }
  return ctx;
}

// After the answer went to the client: the body's failure reported, the connection pooled when
// it may be reused. A request body the client is still sending when the origin answered would
// desynchronise the connection: it is kept only when the request was read completely.
bool Session::end_delivery(Exchange& x, Endpoint& ep, std::optional<socket_type>& upstream,
                           bool reusable) {
  const auto& ucfg = x.upstream->config();
  upstream_ = nullptr;
  if (x.body_failure != FailureKind::none)
    report_attempt(*x.upstream, ep, worker_.index, Failure::of(x.body_failure));
  if (reusable) {
    worker_.pool.release(ep, std::move(*upstream), ucfg.keepalive,
                         pooled_idle_time(ucfg.keepalive_timeout, x.origin_idle_timeout));
  }
  up_in_.clear();
  return x.client_keep_alive && x.request_done;
}

void Session::drop_answer(std::optional<socket_type>& upstream) {
  upstream_ = nullptr;
  upstream.reset();
  up_in_.clear();
  forget_response();
}

// Idempotency-Key (docs/idempotency.md): claims the key, or answers from the store or with a
// refusal (problem+json). True: forward the request.
net::awaitable<bool> Session::idempotency_gate(Exchange& x) {
  auto& ticket = *x.idem;
  const auto& req = *request_;
  // The fingerprint needs the whole body before the first byte leaves: a body larger than the
  // relay block is refused (413), never forwarded unprotected.
  if (!x.request_done || x.chunked_in) {
    ticket.refuse_too_large(worker_.index);
  } else if (co_await ticket.begin(worker_.index, req, req.method(), req.target(),
                                   std::string_view(relay_, x.kept_body), client_ip_, closed_) ==
             idempotency::Ticket::Verdict::forward) {
    co_return true;
  }
  x.status = ticket.status();
  x.error = ticket.refusal();
  if (!ticket.keeps_connection()) x.client_keep_alive = false;
  const auto out = ticket.response(x.request_id, x.client_keep_alive && !worker_.is_stopping());
  expire_after(snapshot_->config->server.idle_timeout);
  auto [ec, n] = co_await net::async_write(client_, net::buffer(out.data(), out.size()), nothrow);
  if (n > 0) x.head_sent = true;
  if (timed(ec)) x.client_keep_alive = false;
  co_return false;
}

// read_final_head()'s and send_whole()'s hooks (upstream_attempt.hpp) for one attempt.
struct Session::HeadHooks {
  Session& s;
  Exchange& x;
  Clock::time_point try_until;
  std::size_t& received_bytes;

  http::ResponseHead& index() { return s.response_index(); }
  std::optional<FailureKind> complete(http::ResponseHead& head) {
    s.response_ = &head;
    return s.final_head(x, head.status());
  }
  net::awaitable<bool> interim(const http::ResponseHead&) { return s.pass_interim(x, try_until); }
  void received(std::size_t n) {
    if (received_bytes == 0 && n > 0) x.first_byte = s.worker_.clock.now();
    received_bytes += n;
  }
  // While uploading, the upload may fail on the client's side: nothing more to read then.
  bool client_gone() const { return s.upload_ != nullptr && s.upload_->client_failed; }
  error_code timed(error_code ec) const { return s.timed(ec); }
  void arm_response() { s.arm_response(try_until); }
  // read_final_head()'s frame comes from the worker's FramePool, like the session's own.
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<FailureKind>, HeadHooks, tls::Stream&,
                                                     HeadBuffer&, std::size_t>::promise_type,
                               PooledFrame<FailureKind>>);
};

// attempt_server()'s hooks (upstream_attempt.hpp) for one try of one request on `ep`.
struct Session::AttemptHooks {
  Session& s;
  Exchange& x;
  Endpoint& ep;
  Clock::time_point try_until;

  net::awaitable<Failure> connect(std::optional<socket_type>& upstream) {
    return s.connect(x, ep, upstream, try_until);
  }
  void ready(socket_type& upstream) {
    s.upstream_ = &upstream;
    x.upstream_ready = s.worker_.clock.now();
  }
  net::awaitable<FailureKind> send(socket_type& upstream, std::uint64_t& sent, std::size_t& received) {
    return s.send_request(x, upstream, try_until, sent, received);
  }
  unsigned status() const { return s.response_->status(); }
  void forget() {
    s.upstream_ = nullptr;
    s.up_in_.clear();
    s.forget_response();
  }
  // Resending on a new connection cannot duplicate work when the request is idempotent and its
  // body (if any) is still at hand.
  bool resend_on_new_connection() const {
    if (!http::is_idempotent(s.request_->verb()) || (!x.body_kept && x.body_consumed)) return false;
    spdlog::debug("upstream {} server {}: pooled connection was closed, reconnecting",
                  x.upstream->name(), ep.identity());
    return true;
  }
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<Failure>, AttemptHooks,
                                                     std::optional<socket_type>&>::promise_type,
                               PooledFrame<Failure>>);
};

// One try on one server (attempt_server(), upstream_attempt.hpp): a pooled connection, unless the
// request is an upgrade (not resent after a pooled connection turns out closed, and consumed by a
// tunnel anyway) or the pooled one's TLS does not fit; else a new one. Not a coroutine: the try's
// frame is attempt_server()'s alone.
net::awaitable<Failure> Session::try_server(Exchange& x, Endpoint& ep,
                                            std::optional<socket_type>& upstream,
                                            Clock::time_point try_until) {
  if (!x.upgrade) upstream = worker_.pool.acquire(ep);
  if (upstream && !tls_fits(*x.upstream, ep, *upstream)) upstream.reset();
  return attempt_server(AttemptHooks{*this, x, ep, try_until}, upstream);
}

// A new connection to `ep` in `upstream` (TCP, then TLS if the server has it), within
// connect_timeout and the try's time. On failure `upstream` is empty.
net::awaitable<Failure> Session::connect(Exchange& x, Endpoint& ep, std::optional<socket_type>& upstream,
                                         Clock::time_point try_until) {
  upstream.emplace(worker_.io);
  upstream_ = &*upstream;
  deadline = std::min(try_until, worker_.clock.now() + Clock::duration(x.upstream->config().connect_timeout));
  timed_out_ = false;
  error_code ec;
  tls::edge::open_socket(upstream->socket(), ep.socket_address().protocol(), ec);  // close-on-exec
  if (!ec) std::tie(ec) = co_await upstream->socket().async_connect(ep.socket_address(), nothrow);
  Failure failure;
  if (ec) {
    const bool timeout = ec == net::error::operation_aborted && timed_out_;
    failure = Failure::of(timeout                                ? FailureKind::connect_timeout
                          : ec == net::error::connection_refused ? FailureKind::connect_refused
                                                                 : FailureKind::connect_error);
  } else {
    error_code ignored;
    upstream->socket().set_option(tcp::no_delay(true), ignored);
    // The handshake shares the connect deadline: connect_timeout covers setting up the
    // connection, TLS included.
    if (ep.tls()) failure = co_await connect_tls(*x.upstream, ep, *upstream);
  }
  if (failure.failed()) {
    upstream_ = nullptr;
    upstream.reset();
  }
  co_return failure;
}

// Reads a Content-Length body that fits the relay block into it, for replay.
net::awaitable<bool> Session::keep_body(Exchange& x) {
  const auto& limits = snapshot_->config->server;
  const auto length = static_cast<std::size_t>(*request_->content_length());
  if (!co_await send_continue(x)) co_return false;
  std::size_t have = std::min(length, in_.size());
  std::memcpy(relay_, in_.data().data(), have);
  in_.consume(have);
  while (have < length) {
    expire_after(limits.idle_timeout);
    auto [ec, n] = co_await client_.async_read_some(net::buffer(relay_ + have, length - have), nothrow);
    ec = timed(ec);
    if (ec) {
      if (ec == beast::error::timeout) co_await send_error(&x, {408, "body timeout"});
      co_return false;
    }
    have += n;
  }
  x.kept_body = length;
  x.body_kept = true;
  x.bytes_in = length;
  x.request_done = true;
  co_return true;
}

// Expect: 100-continue is answered hop by hop when we start reading the body.
net::awaitable<bool> Session::send_continue(Exchange& x) {
  if (!x.expect_continue) co_return true;
  x.expect_continue = false;
  static constexpr std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
  expire_after(snapshot_->config->server.idle_timeout);
  auto [ec, n] = co_await net::async_write(client_, net::buffer(cont), nothrow);
  co_return !timed(ec);
}

// A chunked body is read and validated before the first byte goes upstream, as long as it fits
// the relay block: a malformed one is refused with nothing of it forwarded (nginx buffers such
// bodies too). A body that fits is kept for replay and forwarded with a Content-Length; a longer
// one leaves what was decoded so far in relay_ for stream_request() (chunked_pending_).
net::awaitable<bool> Session::keep_chunked_body(Exchange& x) {
  const auto& limits = snapshot_->config->server;
  chunked_ = http::ChunkedDecoder({.max_line = 4096, .max_trailer = limits.max_header_bytes});
  chunked_pending_ = 0;
  if (!co_await send_continue(x)) co_return false;
  std::size_t have = 0;
  const auto step = co_await decode_chunked(x, have, false);
  if (step == BodyStep::failed) co_return false;
  x.body_consumed = true;
  if (step == BodyStep::some) {
    chunked_pending_ = have;
    co_return true;
  }
  // Trailer fields were checked and are dropped, like the chunk extensions: a body with a known
  // length no longer needs them to be framed (RFC 9112 §7.1.3 lets a proxy discard them).
  x.chunked_in = false;
  x.kept_body = have;
  x.body_kept = true;
  x.kept_length = have;
  co_return true;
}

// Decodes the client's chunked body into relay_[have, relay_size), reading as needed, until the
// body ends (done) or relay_ is full (some). With `flush`, also stops (some) once every byte
// buffered from the client is decoded and the data ends at a chunk boundary: each chunk is
// forwarded only after its data and CRLF were validated (a chunk larger than relay_ goes in
// relay_-sized pieces). Malformed input is answered here, at the byte where it went wrong.
net::awaitable<Session::BodyStep> Session::decode_chunked(Exchange& x, std::size_t& have, bool flush) {
  const auto& limits = snapshot_->config->server;
  for (;;) {
    using Outcome = http::ChunkedFeed::Outcome;
    const auto f = http::feed_chunked(chunked_, view(in_), std::span(relay_, relay_size), have,
                                      x.bytes_in, limits.max_body_bytes, flush);
    in_.consume(f.consumed);
    if (f.outcome == Outcome::invalid) {
      co_await send_error(&x, {http::status_for(f.violation), http::describe(f.violation)});
      co_return BodyStep::failed;
    }
    if (f.outcome == Outcome::too_large) {
      co_await send_error(&x, {413, "body too large"});
      co_return BodyStep::failed;
    }
    if (f.outcome == Outcome::done) {
      x.request_done = true;
      co_return BodyStep::done;
    }
    if (f.outcome == Outcome::some) co_return BodyStep::some;
    arm_body_read();
    auto [ec, n] = co_await client_.async_read_some(prepare_some(in_), nothrow);
    if (upload_ != nullptr) upload_->reading_client = false;
    ec = timed(ec);
    in_.commit(n);
    if (ec) {
      if (ec == beast::error::timeout) co_await send_error(&x, {408, "body timeout"});
      co_return BodyStep::failed;
    }
  }
}

// Head and body towards the origin, then the response head. The body streams through relay_:
// Content-Length bodies as they are, chunked bodies validated chunk by chunk by chunked_ and
// re-encoded, so that what the origin sees is exactly what we validated.
net::awaitable<FailureKind> Session::send_request(Exchange& x, socket_type& upstream,
                                                  Clock::time_point try_until,
                                                  std::uint64_t& sent, std::size_t& received) {
  write_request_head(x);
  // A body still to be read from the client streams while the answer is read (full duplex).
  if (!x.body_kept && (!x.request_done || x.chunked_in))
    return send_streamed(x, upstream, try_until, x.upstream->config().send_timeout, sent, received);
  // No body, or the whole body kept in relay_: one write, repeatable on a retry.
  const std::array<net::const_buffer, 2> out{net::buffer(head_out_),
                                             net::buffer(relay_, x.body_kept ? x.kept_body : 0)};
  deadline = try_until;
  timed_out_ = false;
  return send_whole(HeadHooks{*this, x, try_until, received}, upstream, out, up_in_,
                    snapshot_->config->server.max_header_bytes, sent);
}

// Exchange is defined here, not in session_upload.cpp, where send_streamed() says this.
void Session::note_unsent(Exchange& x, bool unsent) noexcept { x.request_unsent = unsent; }

// The head and a body read from the client as it comes, piece by piece (re-chunked when
// chunked), while response_side() reads the answer: ends when the body is sent, when the origin
// answered first (upload_->stop) or when either side failed (upload.hpp).
net::awaitable<FailureKind> Session::stream_request(Exchange& x, socket_type& upstream,
                                                    std::uint64_t& sent) {
  auto& up = *upload_;
  const auto stopped = [&] { return up.stopped(); };
  bool head_written = false;
  auto content_left = x.chunked_in ? 0 : request_->content_length().value_or(0);

  while (!x.request_done || !head_written) {
    if (up.stop) co_return FailureKind::none;
    // Next piece of body, if any.
    std::string_view piece;
    if (!x.request_done) {
      if (const auto end = co_await next_upload_piece(x, content_left, piece)) co_return *end;
      if (piece.empty() && !x.request_done) continue;  // only chunk framing was parsed
    }

    const FramedPiece out(head_written ? std::string_view() : head_out_, piece, x.chunked_in,
                          x.request_done);
    if (const auto ec = co_await write_upstream(upstream, out.buffers(), sent)) {
      if (stopped()) co_return FailureKind::none;
      up.send_failed(worker_.clock.now());
      if (up.stall == UploadState::Stall::origin) co_return FailureKind::send_timeout;
      arm_response({});  // the origin may still have said why
      co_return sent == 0 ? FailureKind::reset_before_send : FailureKind::reset_after_send;
    }
    head_written = true;
    if (!x.chunked_in && !piece.empty() && piece.data() == view(in_).data()) {
      in_.consume(piece.size());
      x.body_consumed = true;
    }
  }
  // Every byte is written; the response deadline starts once the origin took them all.
  up.draining = true;
  up.wrote(worker_.clock.now());
  timed_out_ = false;
  look_at_drain();
  co_return FailureKind::none;
}

// The next piece of a streamed body in `piece`: what keep_chunked_body() decoded first, then
// validated chunks as they complete; or Content-Length bytes, those that came with the head
// first. nullopt: a piece (perhaps empty); else what stream_request() ends with (none when the
// response side stopped the upload, client_failed when the client failed and was answered).
net::awaitable<std::optional<FailureKind>> Session::next_upload_piece(Exchange& x, std::uint64_t& content_left,
                                                                      std::string_view& piece) {
  const auto& limits = snapshot_->config->server;
  auto& up = *upload_;
  if (!co_await send_continue(x)) co_return FailureKind::client_failed;
  if (x.chunked_in) {
    std::size_t have = std::exchange(chunked_pending_, 0);
    if (have == 0) {
      if (co_await decode_chunked(x, have, true) == BodyStep::failed)
        co_return up.stopped() ? FailureKind::none : FailureKind::client_failed;
    }
    piece = {relay_, have};
    x.request_done = chunked_.done();
    x.body_consumed = true;
    co_return std::nullopt;  // decode_chunked() counts and bounds a chunked body itself
  }
  const auto read = co_await read_piece(client_, in_, std::span(relay_, relay_size), content_left,
                                        false, [this] { arm_body_read(); });
  if (!read.buffered) {
    up.reading_client = false;
    if (const auto ec = timed(read.ec)) {
      if (up.stopped()) co_return FailureKind::none;
      if (ec == beast::error::timeout || up.stall == UploadState::Stall::client)
        co_await send_error(&x, {408, "body timeout"});
      co_return FailureKind::client_failed;
    }
    x.body_consumed = true;
  }
  piece = read.bytes;
  x.bytes_in += piece.size();
  if (limits.max_body_bytes != 0 && x.bytes_in > limits.max_body_bytes) {
    co_await send_error(&x, {413, "body too large"});
    co_return FailureKind::client_failed;
  }
  content_left -= piece.size();
  x.request_done = content_left == 0;
  co_return std::nullopt;
}


// Reads the response head (passing 1xx interim responses to HTTP/1.1 clients) into response_.
// Not a coroutine: the attempt's phase is read_final_head()'s frame alone.
net::awaitable<FailureKind> Session::read_response_head(Exchange& x, socket_type& upstream,
                                                        Clock::time_point try_until,
                                                        std::size_t& received) {
  arm_response(try_until);
  return read_final_head(HeadHooks{*this, x, try_until, received}, upstream, up_in_,
                         snapshot_->config->server.max_header_bytes);
}

// An interim head in response_: 100 answered the origin's own framing; other 1xx go to HTTP/1.1
// clients as they are. False when the client is gone.
net::awaitable<bool> Session::pass_interim(Exchange& x, Clock::time_point try_until) {
  if (response_->status() != 100 && x.client_version == 11) {
    write_interim_head();
    expire_after(snapshot_->config->server.idle_timeout);
    auto [ec, n] = co_await net::async_write(client_, net::buffer(head_out_), nothrow);
    if (timed(ec) || (upload_ != nullptr && upload_->client_failed)) co_return false;
    arm_response(try_until);
  }
  response_ = nullptr;
  co_return true;
}

// A complete response head with status `code`: the attempt's outcome when it is a final answer
// (none; a 101 only as the answer to an upgrade we forwarded, to a protocol it offered, else a
// bad response), nullopt for an interim 1xx.
std::optional<FailureKind> Session::final_head(const Exchange& x, unsigned code) const {
  if (code < 100 || code >= 200) return FailureKind::none;
  if (code != 101) return std::nullopt;
  return x.upgrade && http::valid_switch(*response_, *request_) ? FailureKind::none
                                                                       : FailureKind::bad_response;
}

// The exchange's response index, in the arena: made once, reused by every head of the exchange.
http::ResponseHead& Session::response_index() {
  if (response_store_ == nullptr) {
    response_store_ = new (arena_.allocate(sizeof(http::ResponseHead), alignof(http::ResponseHead)))
        http::ResponseHead;
  }
  return *response_store_;
}

// The response head in hand is dropped (retried, failed, or the exchange ended).
void Session::forget_response() noexcept {
  response_ = nullptr;
}

// An interim head towards the client, in head_out_ (hop-by-hop fields stripped as in any head).
void Session::write_interim_head() {
  head_out_.clear();
  http::ResponseSplice edits;
  edits.kind = http::ResponseSplice::Kind::interim;
  http::splice_response_head(head_out_, *response_, edits);
}

// relay_response()'s hooks (response_relay.hpp) for the exchange's final response.
struct Session::ResponseHooks {
  Session& s;
  Exchange& x;

  void reading() { s.expire_after(x.upstream->config().response_timeout); }
  void writing() { s.expire_after(s.snapshot_->config->server.idle_timeout); }
  error_code timed(error_code ec) const { return s.timed(ec); }
  // A piece reached the client: counted, and captured for a replay.
  void sent(std::string_view piece) {
    x.head_sent = true;
    x.bytes_out += piece.size();
    if (x.idem) x.idem->capture_body(piece);
  }
  void head_reached() { x.head_sent = true; }
  // A coroutine: send_error() takes the error by reference (the error path only).
  net::awaitable<void> refused() { co_await s.send_error(&x, error_for(Failure::of(FailureKind::bad_response))); }
  net::awaitable<void> body_failed(error_code ec, bool head_written, FailureKind failure) {
    return s.body_failed(x, ec, head_written, failure);
  }
  void client_failed() { x.client_keep_alive = false; }
  void done() {
    if (x.idem) x.idem->capture_end();
  }
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<bool>, ResponseHooks, tls::Stream&, HeadBuffer&,
                                                     tls::Stream&, ResponseFraming, std::string&,
                                                     std::span<char>, http::ChunkedDecoder&>::promise_type,
                               PooledFrame<bool>>);
};

// Response head and body towards the client (relay_response(), response_relay.hpp). Returns
// whether the upstream connection may go back to the pool: only after a complete, correctly
// framed response with nothing left over. Not a coroutine: the relay's frame is its own.
net::awaitable<bool> Session::send_response(Exchange& x, socket_type& upstream) {
  const bool is_head = request_->verb() == bhttp::verb::head;
  ResponseFraming framing;
  // A request the origin answered before it had all of it leaves the connection mid-message.
  framing.reusable = response_->keep_alive(is_head) && !x.request_unsent;
  framing.content_length = response_->content_length().value_or(0);
  framing.plan = begin_response(x, is_head);
  if (!framing.plan.keep_alive) x.client_keep_alive = false;
  if (framing.plan.chunked_in) {
    chunked_response_ = http::ChunkedDecoder(
        {.max_line = 4096, .max_trailer = snapshot_->config->server.max_header_bytes});
  }
  return relay_response(ResponseHooks{*this, x}, upstream, up_in_, client_, framing, head_out_,
                        std::span(relay_, relay_size), chunked_response_);
}

// The response's framing towards the client, and its head (rewritten, with the route's rules)
// in head_out_ unless the framing is refused.
http::ResponsePlan Session::begin_response(Exchange& x, bool is_head) {
  const auto& res = *response_;
  x.status = res.status();
  x.origin_idle_timeout = http::keep_alive_timeout(res.value(http::KnownField::keep_alive));
  // An answer that came before the client's body was read to the end closes the connection.
  auto plan = http::plan_response(res, is_head, x.client_version,
                                  x.client_keep_alive && x.request_done && !worker_.is_stopping());
  if (plan.refuse) return plan;
  if (x.idem) x.idem->capture_head(res);
  write_response_head(x, plan);
  return plan;
}

// The origin's body failed. Before its head reached the client the answer is still ours (502
// with the failure); after, the client connection is cut, and the exchange is logged as
// `upstream body cut`, counted in its own status class and against the server (end_delivery()).
net::awaitable<void> Session::body_failed(Exchange& x, error_code ec, bool head_written,
                                          FailureKind failure) {
  spdlog::debug("upstream {} server {}: response body failed: {}", x.upstream->name(),
                x.server->identity(), ec.message());
  x.client_keep_alive = false;
  x.body_failure = failure;
  if (!head_written) {
    co_await send_error(&x, error_for(Failure::of(failure)));
    co_return;
  }
  x.error = upstream_body_cut;
}

// After a valid 101: the 101 to the client, then both streams to a TunnelSession
// (tunnel_session.hpp), which the worker starts once run() has ended (take_tunnel()). False: a
// tunnel is the connection's last use as HTTP, on both sides.
net::awaitable<bool> Session::tunnel(Exchange& x, Endpoint& ep, std::optional<socket_type>& upstream) {
  report_attempt(*x.upstream, ep, worker_.index, Failure::answered(101));
  write_switch_head(x);
  expire_after(snapshot_->config->server.idle_timeout);
  auto [ec, n] = co_await net::async_write(client_, net::buffer(head_out_), nothrow);
  if (n > 0) x.head_sent = true;
  upstream_ = nullptr;
  if (timed(ec) || closed_) co_return false;
  spdlog::debug("upstream {} server {}: tunnel open ({})", x.upstream->name(), ep.identity(),
                response_->value(http::KnownField::upgrade));
  hand_over(x, ep, std::move(*upstream));
  co_return false;
}

// The handoff: both streams, the tunnel's in-flight count on `ep`, the relay block with the bytes
// that came with the heads, and the exchange's access-log record (written when the tunnel closes).
void Session::hand_over(Exchange& x, Endpoint& ep, socket_type&& upstream) {
  tunnel_ = std::make_unique<TunnelHandoff>(std::move(client_), std::move(upstream), snapshot_,
                                            *x.upstream, ep,
                                            PooledBlock(worker_.relay_blocks, std::exchange(relay_, nullptr)));
  auto& h = *tunnel_;
  const auto half = relay_size / 2;
  const auto keep = [&](std::string_view pending, char* to, std::size_t& size, std::string& extra) {
    if (pending.size() <= half) {
      std::memcpy(to, pending.data(), pending.size());
      size = pending.size();
    } else {
      extra.assign(pending);
    }
  };
  keep(view(in_), h.relay.get(), h.client_pending, h.client_extra);
  keep(view(up_in_), h.relay.get() + half, h.origin_pending, h.origin_extra);
  in_.clear();
  up_in_.clear();
  h.start = x.start;
  if (worker_.access_log.enabled()) h.log.emplace(access_record(x));
  closed_ = true;  // the streams are the tunnel's now
}

// The 101 towards the client, in head_out_: the origin's reason and fields, rewritten.
void Session::write_switch_head(Exchange& x) {
  x.status = 101;
  head_out_.clear();
  http::ResponseSplice edits;
  edits.request_id = x.request_id;
  edits.kind = http::ResponseSplice::Kind::switching;
  http::splice_response_head(head_out_, *response_, edits);
}

net::awaitable<void> Session::send_error(Exchange* x, const ProxyError& error) {
  char id_storage[37];
  std::string_view id;
  if (x != nullptr) {
    x->status = error.status;
    x->error = error.reason;
    id = x->request_id;
    if (x->head_sent) co_return;
  } else {
    id = worker_.ids.next(id_storage);
  }
  char buf[1024];
  const auto n = format_error(buf, error, id, false);
  // The access log counts the body of our own answer, as it does an origin's.
  const auto body = error_body_size({buf, n});
  if (x != nullptr) {
    x->bytes_out = body;
  } else {
    Exchange e;
    e.start = worker_.clock.now();
    e.status = error.status;
    e.error = error.reason;
    e.request_id = id;
    e.bytes_out = body;
    log_exchange(e);
  }
  expire_after(std::chrono::seconds(5));
  co_await net::async_write(client_, net::buffer(buf, n), nothrow);
  if (x != nullptr) x->head_sent = true;
}

// ---- edge rules (docs/edge.md): applied while a head is written, in plain functions so that
// their locals stay off the coroutine frames.

http::Variables Session::rule_variables(const Exchange& x, std::span<char, 24> version) const {
  using V = http::Variable;
  const auto& req = *request_;
  http::Variables v;
  v[V::request_id] = x.request_id;
  v[V::host] = http::host_without_port(req.host());
  v[V::client_ip] = client_ip_;
  if (x.upstream != nullptr) v[V::upstream] = x.upstream->name();
  if (x.server != nullptr) v[V::server] = x.server->identity();
  const auto r = std::to_chars(version.data(), version.data() + version.size(), snapshot_->version);
  v[V::config_version] = std::string_view(version.data(), static_cast<std::size_t>(r.ptr - version.data()));
  v[V::request_uri] = http::path_of(req.target());
  return v;
}

// The client's head with the edits spliced in: hop-by-hop fields dropped, X-Forwarded-*,
// X-Request-Id, the route's path rewrite and request rules.
void Session::write_request_head(const Exchange& x) {
  const auto& route = *x.route;
  head_out_.clear();
  http::RequestSplice edits{{client_ip_, client_.is_tls() ? "https" : "http", x.request_id, x.upgrade,
                             snapshot_->config->server.forwarded_header},
                            x.chunked_in, route.rewrite ? &*route.rewrite : nullptr, nullptr, nullptr,
                            x.kept_length};
  if (route.request_rules.empty()) {
    http::splice_request_head(head_out_, *request_, edits);
    return;
  }
  char version[24];
  const auto vars = rule_variables(x, version);
  edits.rules = &route.request_rules;
  edits.vars = &vars;
  http::splice_request_head(head_out_, *request_, edits);
}

void Session::write_response_head(const Exchange& x, const http::ResponsePlan& plan) {
  const auto& rules = x.route->response_rules;
  head_out_.clear();
  http::ResponseSplice edits{x.request_id, plan, x.client_version, x.attempts};
  if (rules.empty()) {
    http::splice_response_head(head_out_, *response_, edits);
    return;
  }
  char version[24];
  const auto vars = rule_variables(x, version);
  edits.rules = &rules;
  edits.vars = &vars;
  http::splice_response_head(head_out_, *response_, edits);
}

// `return`: the route's own answer, no upstream involved. The connection stays open only when the
// request was read whole (a body we did not read would be taken for the next request).
net::awaitable<bool> Session::send_fixed_answer(Exchange& x) {
  const bool keep = x.client_keep_alive && x.request_done && !worker_.is_stopping();
  {
    char version[24];
    const auto vars = rule_variables(x, version);
    head_out_.clear();
    x.status = x.route->answer->status;
    x.bytes_out = http::append_fixed_answer(head_out_, *x.route->answer, vars, &x.route->response_rules,
                                            keep, request_->verb() == bhttp::verb::head,
                                            x.client_version);
  }
  expire_after(snapshot_->config->server.idle_timeout);
  auto [ec, n] = co_await net::async_write(client_, net::buffer(head_out_), nothrow);
  if (n > 0) x.head_sent = true;
  co_return !timed(ec) && keep;
}

void Session::log_exchange(const Exchange& x) {
  if (x.server != nullptr || x.upstream != nullptr) {
    // Per-worker counters of the last server tried (or of the upstream, when no server was):
    // status class, duration histogram.
    auto& c = x.server != nullptr ? x.server->counters(worker_.index)
                                  : x.upstream->unserved(worker_.index);
    const bool from_origin = x.error.empty() && x.status >= 100 && x.status < 600;
    const bool cut = x.error.data() == upstream_body_cut.data();
    c.count_exchange(cut ? 6 : from_origin ? x.status / 100 : 0,
                     std::chrono::duration_cast<std::chrono::microseconds>(worker_.clock.now() - x.start));
  }
  if (worker_.access_log.enabled()) worker_.access_log.write(access_record(x));
}

AccessRecord Session::access_record(const Exchange& x) const {
  AccessRecord r;
  r.client = x.client_ip.empty() ? std::string_view(client_ip_) : x.client_ip;
  if (request_ != nullptr) {
    const auto& req = *request_;
    r.method = req.method();
    r.target = req.target();
    r.protocol = req.version() == 10 ? "HTTP/1.0" : "HTTP/1.1";
    r.host = req.host();
    r.user_agent = req.value("User-Agent");
  } else {
    r.method = "-";
    r.target = "-";
  }
  r.status = x.status;
  r.upstream = x.upstream ? std::string_view(x.upstream->name()) : std::string_view();
  r.server = std::string_view(x.servers_tried.data(), x.servers_tried.size());
  r.attempts = x.attempts;
  r.bytes_in = x.bytes_in;
  r.bytes_out = x.bytes_out;
  r.duration = std::chrono::duration_cast<std::chrono::microseconds>(worker_.clock.now() - x.start);
  r.request_id = x.request_id;
  r.route = x.route != nullptr ? std::string_view(x.route->label) : std::string_view();
  if (x.upstream_ready != Clock::time_point{})
    r.upstream_connect = std::chrono::duration_cast<std::chrono::microseconds>(x.upstream_ready - x.attempt_start);
  if (x.first_byte != Clock::time_point{})
    r.upstream_first_byte = std::chrono::duration_cast<std::chrono::microseconds>(x.first_byte - x.attempt_start);
  r.error = x.error;
  if (x.skip != proxy::RetrySkip::none && !x.error.empty()) r.retry = proxy::log_token(x.skip);
  if (x.idem) r.idempotency = idempotency::to_string(x.idem->outcome());
  return r;
}

}  // namespace sluice::proxy
