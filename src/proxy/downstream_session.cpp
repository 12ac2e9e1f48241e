// The downstream (client) connection: its life (parking, timeouts, shutdown), the read loop and
// each request's head, routing, sluice's own answers and the access log. The request's way to
// the origin and back is in downstream_forward.cpp, downstream_upload.cpp and
// downstream_response.cpp.
#include "downstream_exchange.hpp"
#include "sluice/proxy/unrouted.hpp"
#include "sluice/tls/acme_slot.hpp"

namespace sluice::proxy {

DownstreamSession::DownstreamSession(WorkerContext& worker, tls::Stream client,
                                     const boost::asio::ip::address& client_address,
                                     std::shared_ptr<tls::ServerContext> tls, bool proxy_protocol)
    : worker_(worker), client_(std::move(client)), tls_(std::move(tls)), proxy_protocol_(proxy_protocol) {
  client_addr_ = unmapped(client_address);
  client_ip_ = ip_text(client_addr_).view();  // IPv4 fits the string's own buffer: no allocation
  head_out_ = worker_.head_strings.take();
  worker_.sessions.push_back(*this);
}

DownstreamSession::~DownstreamSession() {
  worker_.head_strings.keep(std::move(head_out_));
  if (is_linked()) worker_.sessions.erase(worker_.sessions.iterator_to(*this));
}

void DownstreamSession::close_if_idle() {
  if (idle_) close();
}

void DownstreamSession::close() {
  if (closed_) return;
  error_code ignored;
  client_.shutdown(tcp::socket::shutdown_both, ignored);
  close_streams();
}

void DownstreamSession::close_streams() noexcept {
  closed_ = true;
  error_code ignored;
  client_.close(ignored);
  up_.close();
  if (h2_ != nullptr) h2_->client_gone();
}

void DownstreamSession::expire() {
  if (parkable_wait_ && worker_.clock.now() < idle_until_) {
    // Idle for park_after: the wait ends and run() hands the connection to the worker's lot.
    parking_ = true;
    deadline = Clock::time_point::max();
    error_code ignored;
    client_.cancel(ignored);
    return;
  }
  if (up_.upload_progressing()) return;
  deadline = Clock::time_point::max();
  timed_out_ = true;
  error_code ignored;
  client_.cancel(ignored);
  up_.cancel();
  if (h2_ != nullptr) h2_->wake();
}

void DownstreamSession::arm_idle(Clock::duration idle_timeout) noexcept {
  const auto now = worker_.clock.now();
  idle_until_ = now + idle_timeout;
  deadline = client_.is_tls() ? idle_until_ : std::min(idle_until_, now + park_after);
  timed_out_ = false;
}

ParkedClient DownstreamSession::take_parked() noexcept {
  parked_ = false;
  closed_ = true;  // the stream is the lot's now
  return {std::move(client_), client_addr_, idle_until_};
}

void DownstreamSession::resumed() noexcept {
  first_request_ = false;
  spoke_http1_ = true;
  proxy_protocol_ = false;  // read before it was parked
}

void DownstreamSession::begin_exchange_memory() {
  if (!arena_.attached()) arena_.attach(worker_.arena_blocks.acquire(), arena_block_size);
}

void DownstreamSession::end_exchange_memory() {
  // The indexes and parsers first: they live in the arena.
  static_assert(std::is_trivially_destructible_v<http::RequestHead>);
  request_ = nullptr;
  if (request_bytes_ != nullptr) arena_.deallocate(std::exchange(request_bytes_, nullptr), 1);
  if (request_store_ != nullptr) {
    arena_.deallocate(request_store_, alignof(http::RequestHead));  // a no-op inside the block
    request_store_ = nullptr;
  }
  up_.end();
  // A plain connection keeps its upstream buffer for the next request: idle, it is parked within
  // park_after, and the session's end gives the buffer back (read_request_head()'s rule for in_).
  if (client_.is_tls()) up_.release_buffer();
  worker_.arena_blocks.release(arena_.detach());
  worker_.relay_blocks.release(std::exchange(relay_, nullptr));
}

net::awaitable<void> DownstreamSession::run() {
  // The head buffers are bounded: a peer cannot make us hold more than a head plus one read.
  // (A value, not a reference into the worker's snapshot: a reload may free that one while this
  // coroutine is suspended.)
  const std::size_t max_header = worker_.snapshot->config->server.max_header_bytes;
  const PoolAllocator<char> blocks(&worker_.head_blocks);
  in_ = HeadBuffer(max_header + read_chunk, blocks);
  up_.start(max_header, blocks);
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
  if (client_.is_tls() && alpn_h2()) co_return hand_to_http2();
  bool nothing_unread = false;  // the last exchange's client asked to close and was read to the end
  ProxyError error;
  std::optional<Exchange> x;  // the request being served
  auto head = HeadResult::closed;
  if (!closed_) head = co_await serve_requests(error, nothing_unread, x);  // no co_await in ?: (GCC 12)
  // Not at shutdown: graceful shutdown closes idle connections instead.
  if (head == HeadResult::http2) co_return hand_to_http2();
  if (head == HeadResult::parked) parked_ = !closed_ && !worker_.is_stopping();
  if (head == HeadResult::error) co_await send_error(nullptr, error);
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
  // Input the client sent that was never read (a body refused before it was read, a request
  // behind the one answered with Connection: close) is still coming or already buffered.
  const bool unread = in_.size() > 0 || (x && !x->request_done);
  bool half_close = !nothing_unread;
  if (!closed_ && !client_.is_tls() && !nothing_unread && unread) {
    co_await linger();
    half_close = false;  // linger() half-closed first
  }
  end_connection(half_close);
}

// A socket closed with unread input makes the kernel answer with a reset, and a reset can
// destroy the answer still in the client's receive queue: a client sending a body we refused
// (413, 431, ...) would see "connection reset" instead of our status. So, nginx's lingering
// close: half-close, then read and discard until the client closes, each wait at most
// linger_wait and all of it at most linger_time. What is read here is never parsed.
net::awaitable<void> DownstreamSession::linger() {
  constexpr Clock::duration linger_wait = std::chrono::seconds(1);
  constexpr Clock::duration linger_time = std::chrono::seconds(5);
  error_code ec;
  client_.shutdown(tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  const auto until = worker_.clock.now() + linger_time;
  while (!closed_ && worker_.clock.now() < until) {
    expire_after(std::min<Clock::duration>(linger_wait, until - worker_.clock.now()));
    in_.clear();
    const auto room = std::min<std::size_t>(in_.max_size(), head_block_size);
    auto [read_ec, n] = co_await client_.async_read_some(in_.prepare(room), nothrow);
    if (read_ec || n == 0) break;
  }
  in_.clear();
}

void DownstreamSession::end_connection(bool half_close) noexcept {
  deadline = Clock::time_point::max();
  if (closed_) return;
  // Half-close so that a client still sending (a body we refused, a request after the one we
  // answered with Connection: close) sees our answer, not a reset. Not needed when a client that
  // asked to close was read to the end (it sends nothing more: its close sends the FIN, nginx's
  // rule for its lingering close, one system call less per such connection), nor after linger().
  error_code ignored;
  if (half_close) client_.shutdown(tcp::socket::shutdown_send, ignored);
  close_streams();
}

// The limits are copied, not referenced: before its first request a connection holds no
// snapshot, and a reload while it waits for bytes frees the worker's old one (ThreadSanitizer
// caught a read through a reference into it during 50 reloads under load).
DownstreamSession::HeadLimits DownstreamSession::head_limits() const noexcept {
  const auto& server = snapshot_ ? snapshot_->config->server : worker_.snapshot->config->server;
  return HeadLimits{server.header_timeout, server.idle_timeout, server.max_header_bytes,
                    server.max_uri_bytes};
}

http::RequestHead& DownstreamSession::request_index() {
  if (request_store_ == nullptr) {
    request_store_ = new (arena_.allocate(sizeof(http::RequestHead), alignof(http::RequestHead)))
        http::RequestHead;
  }
  return *request_store_;
}

// A complete head (or one the admission refuses): the request runs on the newest config, its
// index rebased onto a copy of its bytes in the arena, as body reads may move in_'s. (The copy
// costs a memcpy of the head; keeping the bytes in place would tie every body read to the index.)
HeadResult DownstreamSession::start_request(const http::HeadVerdict& verdict) {
  idle_ = false;
  snapshot_ = worker_.snapshot;
  auto& head = request_index();
  const auto bytes = view(in_).substr(verdict.head_start, verdict.head_size);
  request_bytes_ = static_cast<char*>(arena_.allocate(bytes.size(), 1));
  std::memcpy(request_bytes_, bytes.data(), bytes.size());
  head.rebase({request_bytes_, bytes.size()});
  in_.consume(verdict.head_start + verdict.head_size);
  request_ = &head;
  spoke_http1_ = true;
  refused_ = verdict.admission ? ProxyError{verdict.rejection.status, verdict.rejection.reason} : ProxyError{};
  return HeadResult::ok;
}

// The bytes buffered so far: a head that has its end is indexed (in the arena, for the config
// the request will run on: start_request()); one that has not is only scanned for a violation,
// so that a client sending its head slowly holds no arena block (the `bursts` benchmark's
// thousand partial heads). nullopt: more bytes are needed.
std::optional<HeadResult> DownstreamSession::look_at_head(const HeadLimits& limits, ProxyError& error) {
  const auto buffered = view(in_);
  // A head that came whole and alone ends the buffer with its empty line: no search for it.
  const auto start = http::empty_lines_before(buffered);
  const bool ends_head = buffered.size() >= start + 4 && buffered.ends_with("\r\n\r\n");
  if (!ends_head && buffered.find("\r\n\r\n", start) == std::string_view::npos) {
    const auto step = http::next_head(buffered, limits.max_header_bytes, limits.max_uri_bytes);
    in_.consume(step.skipped);  // the empty lines before a head (RFC 9112 §2.2)
    if (step.scan.result != http::HeadScan::Result::invalid) return std::nullopt;
    return refuse_head(buffered, {http::status_for(step.scan.violation), http::describe(step.scan.violation)}, error);
  }
  begin_exchange_memory();
  const auto verdict = http::index_request_head(
      buffered, {limits.max_header_bytes, limits.max_uri_bytes, worker_.snapshot->config->server.max_body_bytes},
      request_index());
  if (verdict.result == http::HeadScan::Result::complete || verdict.admission) return start_request(verdict);
  if (verdict.result == http::HeadScan::Result::invalid)
    return refuse_head(buffered, {verdict.rejection.status, verdict.rejection.reason}, error);
  in_.consume(verdict.head_start);
  return std::nullopt;
}

// A head the HTTP/1.1 scanner refused: answered with `why`, unless it is HTTP/2's preface.
HeadResult DownstreamSession::refuse_head(std::string_view buffered, const ProxyError& why, ProxyError& error) const {
  if (h2c_preface(buffered)) return HeadResult::http2;
  error = why;
  return HeadResult::error;
}

// HTTP/2 with prior knowledge (RFC 9113 §3.3) on a plain listener with [server] h2c: the
// connection's first bytes are the client preface, or its start (the scanner refuses
// "PRI * HTTP/2" already; the rest of the preface is nghttp2's to check). Looked at only for a
// head the HTTP/1.1 scanner refused (its version), so that HTTP/1.1 requests pay nothing for it.
bool DownstreamSession::h2c_preface(std::string_view buffered) const noexcept {
  const bool preface = buffered.size() < h2_preface_line.size() ? h2_preface_line.starts_with(buffered)
                                                                : buffered.starts_with(h2_preface_line);
  return preface && !spoke_http1_ && !client_.is_tls() && worker_.snapshot->config->server.h2c;
}

// ALPN chose h2 in the handshake (tls/context.cpp offers it when the listener's alpn lists it).
bool DownstreamSession::alpn_h2() noexcept {
  const unsigned char* data = nullptr;
  unsigned int size = 0;
  SSL_get0_alpn_selected(client_.tls()->native_handle(), &data, &size);
  return std::string_view(reinterpret_cast<const char*>(data), size) == h2_alpn;
}

// The connection, what was read of it and who the client is, to an Http2Session: run() ends and
// the worker starts it (take_http2()).
void DownstreamSession::hand_to_http2() noexcept {
  end_exchange_memory();
  http2_ = std::make_unique<Http2Handoff>(
      Http2Handoff{std::move(client_), client_addr_, client_ip_, std::move(tls_), std::string(view(in_)),
                   std::move(client_cert_)});
  in_.clear();
  closed_ = true;  // the stream is the HTTP/2 session's now
  deadline = Clock::time_point::max();
}

// read_request_head()'s hooks (request_head.hpp) for the client's next request head: the look at
// the bytes (look_at_head()), the idle and parking state, the deadlines.
struct DownstreamSession::RequestHooks {
  DownstreamSession& s;
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

  // Serving: each head taken goes to handle_request(), in an exchange on run()'s frame.
  std::optional<Exchange>& x;
  bool& nothing_unread;  // run()'s: the last exchange's client can send nothing more

  net::awaitable<bool> exchange() {
    x.emplace();
    x->start = s.worker_.clock.now();
    s.x_ = &*x;
    return s.handle_request(*x);
  }
  bool exchanged(bool keep) {
    // Nothing more can come from a client that asked to close and was read to the end.
    nothing_unread = !s.request_->keep_alive() && x->request_done && s.in_.size() == 0;
    if (!s.tunnel_) s.log_exchange(*x);  // else the tunnel logs it when it closes
    s.end_exchange_memory();
    s.x_ = nullptr;
    x.reset();
    if (!keep || s.worker_.is_stopping() || s.closed_) return false;
    limits = s.begin_head();
    return true;
  }
  // read_request_head()'s frame comes from the worker's FramePool, like the session's own.
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<HeadResult>, RequestHooks,
                                                     tls::Stream&, HeadBuffer&>::promise_type,
                               PooledFrame<HeadResult>>);
};

// Before each request head: idle between requests, idle_timeout until the first byte, then
// header_timeout for the whole head. A new connection gets header_timeout from the start
// (slowloris protection), and is not idle: its client is sending its first request, and closing
// it at shutdown or at a binary upgrade's handover would fail a request already on its way.
DownstreamSession::HeadLimits DownstreamSession::begin_head() {
  const HeadLimits limits = head_limits();
  idle_ = in_.size() == 0 && !first_request_;
  if (idle_) {
    arm_idle(limits.idle_timeout);
  } else if (first_request_) {
    expire_from_now(limits.header_timeout);
  } else {
    expire_after(limits.header_timeout);
  }
  first_request_ = false;
  return limits;
}

// The connection's requests, one after the other (proxy::read_request_head() serving them: one
// frame for them all): closed, error (answer in `error`) or parked. Not a coroutine: the phase's
// frame is the template's alone, and the exchange lives on run()'s frame.
net::awaitable<HeadResult> DownstreamSession::serve_requests(ProxyError& error, bool& nothing_unread,
                                                            std::optional<Exchange>& x) {
  return proxy::read_request_head(RequestHooks{*this, begin_head(), error, x, nothing_unread}, client_, in_);
}

// Not a coroutine: the common request (routed, admitted, forwarded with no body to prepare)
// awaits forward_attempts() itself, with no frame of handle_request's around it (one frame fewer
// per request); the rest goes through a coroutine that awaits what it needs.
net::awaitable<bool> DownstreamSession::handle_request(Exchange& x) {
  const auto& req = *request_;
  x.request_id = http::choose_request_id(req, worker_.ids, x.generated_id);
  x.client_keep_alive = req.keep_alive();
  x.client_version = req.version();
  x.request_done = req.body_done();

  // 413, CONNECT (501), a bad absolute-form target (400), found by the index (its admission);
  // an absolute-form target's authority is the host.
  if (refused_.status != 0) return answer_error(x, refused_);
  // RFC 8555 §8.3: a pending ACME HTTP-01 challenge is answered on plain listeners, before routing.
  if (tls_ == nullptr)
    if (auto key_authorization = tls::acme::http_challenge_answer(http::path_of(req.target())))
      return send_acme_answer(x, *key_authorization);
  x.route = snapshot_->router.match(req.host(), http::path_of(req.target()));
  // Error answers close the connection (they say Connection: close).
  if (x.route == nullptr) return answer_error(x, {404, "no route"});
  if (x.route->require_client_cert && (client_cert_ == nullptr || !client_cert_->verified()))
    return answer_error(x, {403, "client certificate required"});
  x.upstream = x.route->upstream;
  if (const auto* policy = x.route->compress)
    x.compress_side = {compress::negotiate(compress::accept_encoding_of(req), policy->preference),
                       req.verb() == bhttp::verb::head, x.client_version};
  const auto client = client_of(req);
  x.client_ip = client.text;
  // Admission before a route's own answer: deny and rate limits hold for `return` routes too.
  if (const auto refused = admit(x.route->admission, req, req.target(), client); refused.status != 0)
    return answer_error(x, refused);
  if (x.route->answer) return send_fixed_answer(x);
  const auto facts = begin_forward(x);
  // An upgrade has no HTTP/2 form here (RFC 8441's extended CONNECT is not spoken to servers).
  if (x.upgrade && x.upstream->config().protocol != config::UpstreamProtocol::http1)
    return answer_error(x, {501, "upgrade to an HTTP/2 upstream"});
  if (prepares_body(x)) return forward_prepared(x, facts);
  if (x.upstream->config().protocol != config::UpstreamProtocol::http1)
    return forward_attempts(H2ForwardHooks{*this, x}, start_attempts(x, facts));
  return forward_attempts(ForwardHooks{*this, x}, start_attempts(x, facts));
}

net::awaitable<bool> DownstreamSession::answer_error(Exchange& x, ProxyError error) {
  co_await send_error(&x, error);
  co_return false;
}

// A request whose body is kept or validated first, or whose Idempotency-Key is guarded.
net::awaitable<bool> DownstreamSession::forward_prepared(Exchange& x, RequestFacts facts) {
  const auto prepared = co_await prepare_forward(x);
  bool keep = prepared == Prepared::keep;
  if (prepared == Prepared::forward && x.upstream->config().protocol != config::UpstreamProtocol::http1) {
    keep = co_await forward_attempts(H2ForwardHooks{*this, x}, start_attempts(x, facts));
  } else if (prepared == Prepared::forward) {
    keep = co_await forward_attempts(ForwardHooks{*this, x}, start_attempts(x, facts));
  }
  if (x.idem) x.idem->finish(worker_.index, worker_.io.get_executor(), x.status);
  co_return keep;
}

net::awaitable<void> DownstreamSession::send_error(Exchange* x, const ProxyError& error) {
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
  // Before its first request a connection holds no snapshot: the worker's newest, held here for
  // the write, as a reload may free it meanwhile (the page is the config's bytes).
  const auto snapshot = snapshot_ ? snapshot_ : worker_.snapshot;
  const auto style = error_style(*snapshot->config, x != nullptr ? x->route : nullptr, error.status);
  char buf[1024];
  const auto n = format_error(buf, error, id, false, style);
  const auto start = worker_.clock.now();
  expire_after(std::chrono::seconds(5));
  const std::array<net::const_buffer, 2> pieces{net::buffer(buf, n), net::buffer(style.page)};
  const auto [ec, written] = co_await net::async_write(client_, pieces, nothrow);
  // The access log counts the body of our own answer the client took, as it does an origin's.
  const auto body = body_bytes_sent({buf, n}, written);
  if (x != nullptr) {
    x->bytes_out = body;
    x->head_sent = true;
  } else {
    Exchange e;
    e.start = start;
    e.status = error.status;
    e.error = error.reason;
    e.request_id = id;
    e.bytes_out = body;
    log_exchange(e);
  }
}

// How sluice's own answer with `status` is told ([server] error_detail, the route's or the
// server's error page for it), with the Date of this second.
ErrorStyle DownstreamSession::error_style(const config::Config& config, const Router::Route* route,
                                          unsigned status) {
  return error_style_of(config, route != nullptr ? route->error_pages : nullptr, status, worker_.date.now());
}

// ---- edge rules (docs/edge.md): applied while a head is written, in plain functions so that
// their locals stay off the coroutine frames.

http::Variables DownstreamSession::rule_variables(const Exchange& x, std::span<char, 24> version) const {
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
  if (client_cert_ != nullptr) {
    v[V::client_cert_subject] = client_cert_->subject;
    v[V::client_cert_san] = client_cert_->san;
    v[V::client_cert_fingerprint] = client_cert_->fingerprint;
    v[V::client_cert_verify] = client_cert_->verify;
  }
  return v;
}

// The client's head with the edits spliced in: hop-by-hop fields dropped, X-Forwarded-*,
// X-Request-Id, the route's path rewrite and request rules.
void DownstreamSession::write_request_head(const Exchange& x) {
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

void DownstreamSession::write_response_head(const Exchange& x, const http::ResponseHead& res,
                                            const http::ResponsePlan& plan, const compress::Plan& coding) {
  const auto& rules = x.route->response_rules;
  head_out_.clear();
  // Sluice-Attempts is internal detail, shown with error_detail = "full" only.
  const bool detail = snapshot_->config->server.error_detail == config::ErrorDetail::full;
  http::ResponseSplice edits{x.request_id, plan, x.client_version, detail ? x.attempts : 1};
  edits.date = worker_.date.now();
  compress::edit_head(coding, edits);
  if (rules.empty()) {
    http::splice_response_head(head_out_, res, edits);
    return;
  }
  char version[24];
  const auto vars = rule_variables(x, version);
  edits.rules = &rules;
  edits.vars = &vars;
  http::splice_response_head(head_out_, res, edits);
}

// `return`: the route's own answer, no upstream involved. The connection stays open only when the
// request was read whole (a body we did not read would be taken for the next request).
net::awaitable<bool> DownstreamSession::send_fixed_answer(Exchange& x) {
  const bool keep = x.client_keep_alive && x.request_done && !worker_.is_stopping();
  {
    char version[24];
    const auto vars = rule_variables(x, version);
    head_out_.clear();
    x.status = x.route->answer->status;
    x.bytes_out = http::append_fixed_answer(head_out_, *x.route->answer, vars, &x.route->response_rules,
                                            keep, request_->verb() == bhttp::verb::head,
                                            x.client_version, worker_.date.now());
  }
  expire_after(snapshot_->config->server.idle_timeout);
  auto [ec, n] = co_await net::async_write(client_, net::buffer(head_out_), nothrow);
  if (n > 0) x.head_sent = true;
  co_return !timed(ec) && keep;
}

// The key authorization, as the CA expects it (RFC 8555 §8.3); the connection then closes.
net::awaitable<bool> DownstreamSession::send_acme_answer(Exchange& x, std::string key_authorization) {
  x.status = 200;
  head_out_ = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
              std::to_string(key_authorization.size()) + "\r\nConnection: close\r\n\r\n" + key_authorization;
  x.bytes_out = head_out_.size();
  expire_after(snapshot_->config->server.idle_timeout);
  auto [ec, n] = co_await net::async_write(client_, net::buffer(head_out_), nothrow);
  if (n > 0) x.head_sent = true;
  co_return false;
}

void DownstreamSession::log_exchange(const Exchange& x) {
  // Per-worker counters of the last server tried (or of the upstream, when no server was; or of
  // no upstream, for an answer before routing or a `return`): source and status class, duration.
  auto& c = x.server != nullptr     ? x.server->counters(worker_.index)
            : x.upstream != nullptr ? x.upstream->unserved(worker_.index)
                                    : unrouted_counters(worker_.index);
  const bool valid = x.status >= 100 && x.status < 600;
  const bool cut = x.cut == Exchange::Cut::origin;
  const bool client_cut = x.cut == Exchange::Cut::client;
  const bool own = (!x.error.empty() && !client_cut) || x.server == nullptr;
  if (valid || cut) {
    const unsigned own_status = x.cut == Exchange::Cut::sluice ? 500 : x.status;
    c.count_exchange(cut          ? EndpointCounters::cut_slot
                     : client_cut ? EndpointCounters::client_cut_slot
                     : own        ? EndpointCounters::own_answer_slot(own_status)
                                  : x.status / 100,
                     std::chrono::duration_cast<std::chrono::microseconds>(worker_.clock.now() - x.start));
  }
  if (worker_.access_log.enabled()) {
    AttemptRecord::ServersText servers;
    worker_.access_log.write(access_record(x, servers));
  }
}

AccessRecord DownstreamSession::access_record(const Exchange& x, AttemptRecord::ServersText& servers) const {
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
  r.server = x.servers_tried(servers);
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
  if (client_cert_ != nullptr) {
    r.client_cert_verify = client_cert_->verify;
    r.client_cert_subject = client_cert_->subject;
  }
  return r;
}

}  // namespace sluice::proxy
