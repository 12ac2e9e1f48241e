// An HTTP/2 request stream: its fields written as an HTTP/1.1 head (RFC 9113 §8.3.1), its body
// buffered, then routed, admitted and forwarded like an HTTP/1.1 request. The answer is in
// h2_response.cpp.
#include "sluice/proxy/h2_stream.hpp"

#include <charconv>
#include <cstring>
#include <new>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <boost/beast/core/string.hpp>

#include "sluice/core/block_cache.hpp"
#include "sluice/http/rewrite.hpp"
#include "sluice/proxy/admission.hpp"
#include "sluice/proxy/grpc.hpp"
#include "sluice/proxy/h2_session.hpp"
#include "sluice/proxy/upstream_attempt.hpp"

namespace sluice::proxy {

namespace net = boost::asio;
using boost::system::error_code;

namespace {
constexpr std::string_view crlf = "\r\n";
}  // namespace

Http2Stream::Http2Stream(Http2Session& session, std::int32_t id)
    : session_(session), worker_(session.worker()), id_(id), wake_(session.worker().io),
      body_wake_(session.worker().io) {
  start_ = worker_.clock.now();
  // The request's head, the head to the origin and the answer's fields: strings whose capacity
  // an earlier stream left (core/string_pool.hpp), not a malloc each per request.
  head_ = worker_.head_strings.take();
  head_out_ = worker_.head_strings.take();
  nv_text_ = worker_.head_strings.take();
}

void* Http2Stream::operator new(std::size_t size) {
  if (void* p = block_cache::allocate(size)) return p;
  throw std::bad_alloc();
}

void Http2Stream::operator delete(void* p) noexcept { block_cache::release(p); }

Http2Stream::~Http2Stream() {
  if (relay_ != nullptr) worker_.relay_blocks.release(relay_);
  worker_.head_strings.keep(std::move(head_));
  worker_.head_strings.keep(std::move(head_out_));
  worker_.head_strings.keep(std::move(nv_text_));
  if (arena_.attached()) worker_.arena_blocks.release(arena_.detach());
}

// A field of the request. nghttp2 has checked it (RFC 9113 §8.2, §8.3): pseudo-header fields
// come first, once each; the regular ones are lowercase, with no CR, LF or NUL, and none is
// connection-specific.
void Http2Stream::on_header(std::string_view name, std::string_view value) {
  if (bad_ || refused_.status != 0) return;
  if (name.starts_with(':')) {
    if (name == ":method") method_ = value;
    else if (name == ":scheme") scheme_ = value;
    else if (name == ":authority") authority_ = value;
    else if (name == ":path") path_ = value;
    return;
  }
  begin_head();
  if (bad_ || refused_.status != 0) return;
  if (name == "host") {
    // RFC 9113 §8.3.1: Host and :authority must name the same authority.
    if (!authority_.empty()) {
      if (value != authority_) malformed("Host differs from :authority");
      return;
    }
    authority_ = value;
  } else if (name == "cookie") {
    // RFC 9113 §8.2.3: the crumbs are joined into one field for HTTP/1.1.
    if (!cookie_.empty()) cookie_ += "; ";
    cookie_ += value;
    return;
  } else if (name == "content-type") {
    grpc_ = is_grpc_content_type(value);
  } else if (name == "content-length") {
    // Checked against the DATA by nghttp2; written again from what arrived (finish_head()).
    std::uint64_t n = 0;
    std::from_chars(value.data(), value.data() + value.size(), n);
    declared_length_ = n;
    return;
  }
  append_field(name, value);
}

void Http2Stream::on_trailer(std::string_view name, std::string_view value) {
  if (bad_ || name.starts_with(':')) return;
  std::size_t size = name.size() + value.size();
  for (const auto& f : request_trailers_) size += f.name.size() + f.value.size();
  if (size > session_.worker().snapshot->config->server.max_header_bytes) return malformed("trailers too large");
  request_trailers_.push_back({std::string(name), std::string(value)});
}

// The request line, once the pseudo-header fields are all in.
void Http2Stream::begin_head() {
  if (head_begun_) return;
  head_begun_ = true;
  // CONNECT (RFC 9113 §8.5) would turn the stream into a tunnel: not offered.
  if (method_ == "CONNECT") return refuse({501, "CONNECT not supported over HTTP/2"});
  head_.reserve(256);
  head_.append(method_).append(" ").append(path_).append(" HTTP/1.1\r\n");
  if (!authority_.empty()) append_field("Host", authority_);
}

void Http2Stream::append_field(std::string_view name, std::string_view value) {
  head_.append(name).append(": ").append(value).append(crlf);
  const auto limit = session_.worker().snapshot->config->server.max_header_bytes;
  if (head_.size() > limit) refuse({431, "header too large"});
}

// A malformed request (RFC 9113 §8.1.1): the stream is reset, nothing of it forwarded.
void Http2Stream::malformed(const char* why) {
  bad_ = true;
  spdlog::debug("client {}: HTTP/2 stream {} malformed: {}", session_.client_ip(), id_, why);
  nghttp2_submit_rst_stream(session_.native(), NGHTTP2_FLAG_NONE, id_, NGHTTP2_PROTOCOL_ERROR);
  session_.want_write();
}

// Answered at once by sluice (an early refusal): the stream is ready to serve it.
void Http2Stream::refuse(ProxyError error) {
  if (refused_.status == 0) refused_ = error;
  ready_ = true;
}

// The head is in: the stream starts once the bytes read with it are taken (feed()). A body that
// ended by then goes whole; else it is streamed (next_piece()).
void Http2Stream::on_headers_end(bool end_stream) {
  begin_head();
  ready_ = true;
  if (end_stream) on_request_end();
}

void Http2Stream::on_data(std::string_view data) {
  received_ += data.size();
  if (bad_ || refused_.status != 0 || finished_) return consume(data.size());
  const auto max_body = session_.worker().snapshot->config->server.max_body_bytes;
  if (max_body != 0 && received_ > max_body) {
    consume(data.size());
    too_large_ = true;
    wake_.cancel();
    body_wake_.cancel();
    if (!started_) refuse({413, "body too large"});
    return;
  }
  // Unconsumed, so bounded by the stream's window (http2_initial_window_bytes).
  body_.append(data);
  wake_.cancel();
  body_wake_.cancel();
}

void Http2Stream::on_request_end() {
  if (bad_ || request_done_) return;
  request_done_ = true;
  if (refused_.status == 0 && !started_) finish_head();
  ready_ = true;
  wake_.cancel();
  body_wake_.cancel();
}

// The head's last lines: the cookie, the body's framing, the empty line. A body in hand goes with
// its length; a streamed one with the length the client declared, else chunked.
void Http2Stream::finish_head() {
  if (!cookie_.empty()) append_field("cookie", cookie_);
  std::optional<std::uint64_t> length;
  if (streamed_) length = declared_length_;
  else if (!body_.empty() || declared_length_) length = body_.size();
  if (length) {
    char digits[24];
    const auto r = std::to_chars(digits, digits + sizeof digits, *length);
    append_field("content-length", {digits, static_cast<std::size_t>(r.ptr - digits)});
  } else if (streamed_) {
    append_field("transfer-encoding", "chunked");
  }
  head_.append(crlf);
}

// Body bytes taken: the client's windows open by as much.
void Http2Stream::consume(std::size_t n) {
  if (n == 0) return;
  if (nghttp2_session_consume(session_.native(), id_, n) != 0)
    nghttp2_session_consume_connection(session_.native(), n);
  session_.want_write();
}

// nghttp2 closed the stream: reset by the client (its origin connection, mid-answer, is closed
// too), or ended as it sent the answer's last DATA (the origin's answer was read whole: its
// connection goes back to the pool).
void Http2Stream::on_close() {
  if (closed_) return;
  closed_ = true;
  timed_out_ = false;
  if (!eof_sent_) up_.close();
  h2_.client_gone();
  wake_all();
}

// Every wait of the stream looks at its state again: the answer's and the upload's, a connection
// being made (cancelled) or waited for, an upstream call.
void Http2Stream::wake_all() noexcept {
  wake_.cancel();
  body_wake_.cancel();
  h2_.wake();
}

void Http2Stream::expire() {
  if (up_.upload_progressing()) return;
  deadline = Clock::time_point::max();
  timed_out_ = true;
  up_.cancel();
  wake_all();
}

void Http2Stream::arm(Clock::duration d) noexcept {
  deadline = worker_.clock.now() + d;
  timed_out_ = false;
}

void Http2Stream::invalid() {
  bad_ = true;
  up_.close();
  h2_.client_gone();
  wake_all();
}

net::awaitable<void> Http2Stream::run() {
  if (closed_ || bad_) {  // reset before it began
    finished_ = true;
    co_return;
  }
  snapshot_ = worker_.snapshot;
  if (!request_done_ && refused_.status == 0 && !bad_) {
    streamed_ = true;
    finish_head();
  }
  co_await serve();
  h2_.end();
  while (uploading_) {  // the upload's coroutine holds this stream until it ends
    wake_.expires_at(net::steady_timer::time_point::max());
    co_await wake_.async_wait(net::as_tuple(net::use_awaitable));
  }
  consume(std::exchange(body_, std::string()).size());
  if (!bad_) log_exchange();
  up_.end();
  up_.release_buffer();
  if (arena_.attached()) worker_.arena_blocks.release(arena_.detach());
  deadline = Clock::time_point::max();
  finished_ = true;
}

// The request as HTTP/1.1, indexed by the strict scanner, refused or routed and forwarded.
net::awaitable<void> Http2Stream::serve() {
  if (refused_.status != 0) co_return co_await send_error(refused_);
  const auto& server = snapshot_->config->server;
  arena_.attach(worker_.arena_blocks.acquire(), arena_block_size);
  request_ = new (arena_.allocate(sizeof(http::RequestHead), alignof(http::RequestHead))) http::RequestHead;
  const auto verdict = http::index_request_head(head_, {server.max_header_bytes, server.max_uri_bytes, 0}, *request_);
  if (verdict.result != http::HeadScan::Result::complete || verdict.admission) {
    const auto& r = verdict.rejection;
    co_return co_await send_error({r.status != 0 ? r.status : 400u, r.reason.empty() ? "bad request" : r.reason});
  }
  request_id_ = http::choose_request_id(*request_, worker_.ids, generated_id_);
  if (const auto refused = route_request(); refused.status != 0) co_return co_await send_error(refused);
  if (route_->answer) co_return co_await send_fixed_answer();
  co_await forward();
}

// The route, its client-certificate rule and its admission (allow/deny, rate limit), as for an
// HTTP/1.1 request. A ProxyError with status 0 lets the request on.
ProxyError Http2Stream::route_request() {
  const auto& req = *request_;
  route_ = snapshot_->router.match(req.host(), http::path_of(req.target()));
  if (route_ == nullptr) return {404, "no route"};
  const auto* cert = session_.client_cert();
  if (route_->require_client_cert && (cert == nullptr || !cert->verified())) return {403, "client certificate required"};
  upstream_ = route_->upstream;
  const auto client = resolve_client(req, session_.client_ip(), session_.client_address(),
                                     snapshot_->config->server.trusted_proxies);
  client_text_ = client.text;
  return admit_request(route_->admission, client, req, req.target(), worker_.clock.now(), worker_.index);
}

// What the attempt loop (forward_attempts(), forwarder.hpp) asks of an HTTP/2 stream. The body
// is buffered whole, so every attempt can send it again.
struct Http2Stream::ForwardHooks {
  Http2Stream& s;

  net::awaitable<Failure> attempt(Endpoint& ep, Clock::time_point try_until) {
    try_until = std::min(try_until, s.call_deadline_);
    Failure f;  // no co_await inside ?: (GCC 12 miscompiles it)
    if (s.to_h2()) f = co_await s.attempt_h2(ep, try_until);
    else f = co_await s.up_.attempt(s, ep, try_until);
    // The client reset the stream meanwhile: no retry, no answer.
    if (s.closed_ || s.bad_) co_return Failure::of(FailureKind::client_failed);
    co_return f;
  }
  net::awaitable<bool> tunnel(Endpoint&) {
    s.up_.drop();
    co_return false;
  }
  bool respond_now(bool&) { return false; }
  net::awaitable<bool> respond() { return s.to_h2() ? s.respond_h2() : s.respond(); }
  bool delivered(Endpoint& ep, bool reusable) {
    if (s.body_failure_ != FailureKind::none)
      report_attempt(*s.upstream_, ep, s.worker_.index, Failure::of(s.body_failure_));
    if (s.to_h2()) s.h2_.end();
    else s.up_.deliver_done(ep, reusable, s.origin_idle_);
    return false;
  }
  void drop() {
    if (s.to_h2()) s.h2_.end();
    else s.up_.drop();
  }
  net::awaitable<void> fail(const ProxyError& error) { return s.send_error(error); }
  net::awaitable<bool> wait(Clock::duration d) { return s.wait_for(d); }
  // A streamed body whose bytes sent so far were all kept (h2 upstreams) can go again.
  bool replayable() const { return !s.body_consumed_ || (s.to_h2() && !s.replay_cut_); }
  std::string_view retry_after() const { return s.to_h2() ? s.h2_.retry_after() : s.up_.retry_after(); }
  double uniform() { return s.worker_.uniform(); }
};

net::awaitable<void> Http2Stream::forward() {
  const auto& req = *request_;
  const auto& retry = upstream_->config().retry;
  RequestFacts facts;
  facts.idempotent_method = http::is_idempotent(req.verb());
  facts.body_kept = !streamed_;
  facts.has_idempotency_key = !retry.idempotency_header.empty() &&
                              req.count(retry.idempotency_header, upstream_->idempotency_field()) != 0;
  if (const auto timeout = grpc_ ? grpc_timeout(req.value("grpc-timeout")) : std::nullopt)
    call_deadline_ = start_ + std::chrono::duration_cast<Clock::duration>(*timeout);
  const auto& server = snapshot_->config->server;
  up_.start(server.max_header_bytes, PoolAllocator<char>(&worker_.head_blocks));
  up_.begin(*upstream_, record_, server.max_header_bytes, false);
  idem_ = idempotency::Ticket::make(upstream_->shared_idempotency(), req, req.verb(), false);
  bool gate = true;  // no co_await inside && (GCC 12 miscompiles it)
  if (idem_) gate = co_await idempotency_gate();
  if (gate) {
    auto& f = forwarder_.emplace(*upstream_, worker_.clock, worker_.index, facts,
                                 request_pick_context(*upstream_, req, client_text_), record_);
    co_await forward_attempts(ForwardHooks{*this}, f);
  }
  if (idem_) idem_->finish(worker_.index, worker_.io.get_executor(), status_);
}

net::awaitable<bool> Http2Stream::idempotency_gate() {
  auto& ticket = *idem_;
  const auto& req = *request_;
  // The fingerprint needs the whole body before the first byte leaves. Its DATA is not consumed
  // before it goes to a server, so a body past the stream's window could never come whole: one
  // larger than the window or the relay block is refused (413), never forwarded unprotected.
  const auto& server = snapshot_->config->server;
  const auto limit = std::min<std::size_t>(relay_block_size, server.http2_initial_window_bytes);
  if (!co_await whole_body(limit)) {
    if (closed_ || bad_) co_return false;
    if (timed_out_) {
      co_await send_error({408, "request body timeout"});
      co_return false;
    }
    ticket.refuse_too_large(worker_.index);
  } else if (co_await ticket.begin(worker_.index, req, req.method(), req.target(), body_, client_text_, closed_) ==
             idempotency::Ticket::Verdict::forward) {
    co_return true;
  }
  status_ = ticket.status();
  error_ = ticket.refusal();
  const auto answer = ticket.response(request_id_, true, server.error_detail == config::ErrorDetail::full,
                                      worker_.date.now());
  if (!closed_) co_await send_http1_answer(answer, {});
  co_return false;
}

// True once the request's body is all in body_ and at most `limit` bytes; waits for it while it
// keeps coming within `limit` (idle_timeout between pieces).
net::awaitable<bool> Http2Stream::whole_body(std::size_t limit) {
  auto seen = body_.size();
  arm(snapshot_->config->server.idle_timeout);
  while (!request_done_ && body_.size() < limit && !closed_ && !bad_ && !timed_out_ && !too_large_) {
    wake_.expires_at(net::steady_timer::time_point::max());
    co_await wake_.async_wait(net::as_tuple(net::use_awaitable));
    if (body_.size() != std::exchange(seen, body_.size())) arm(snapshot_->config->server.idle_timeout);
  }
  if (!timed_out_) deadline = Clock::time_point::max();  // the tries set their own
  co_return request_done_ && !too_large_ && !closed_ && !bad_ && body_.size() <= limit;
}

// The client's head with the edits spliced in, for this attempt's server: hop-by-hop fields
// dropped, X-Forwarded-*, X-Request-Id, the route's path rewrite and request rules.
std::string_view Http2Stream::forward_head() {
  const auto& route = *route_;
  head_out_.clear();
  http::RequestSplice edits{{session_.client_ip(), session_.is_tls() ? "https" : "http", request_id_, false,
                             snapshot_->config->server.forwarded_header},
                            streamed_ && !declared_length_, route.rewrite ? &*route.rewrite : nullptr, nullptr,
                            nullptr, std::nullopt};
  if (route.request_rules.empty()) {
    http::splice_request_head(head_out_, *request_, edits);
    return head_out_;
  }
  char version[24];
  const auto vars = rule_variables(version);
  edits.rules = &route.request_rules;
  edits.vars = &vars;
  http::splice_request_head(head_out_, *request_, edits);
  return head_out_;
}

// The edge rules' variables (docs/edge.md) of this request.
http::Variables Http2Stream::rule_variables(std::span<char, 24> version) const {
  using V = http::Variable;
  const auto& req = *request_;
  http::Variables v;
  v[V::request_id] = request_id_;
  v[V::host] = http::host_without_port(req.host());
  v[V::client_ip] = session_.client_ip();
  if (upstream_ != nullptr) v[V::upstream] = upstream_->name();
  if (record_.server != nullptr) v[V::server] = record_.server->identity();
  const auto r = std::to_chars(version.data(), version.data() + version.size(), snapshot_->version);
  v[V::config_version] = std::string_view(version.data(), static_cast<std::size_t>(r.ptr - version.data()));
  v[V::request_uri] = http::path_of(req.target());
  if (const auto* cert = session_.client_cert()) {
    v[V::client_cert_subject] = cert->subject;
    v[V::client_cert_san] = cert->san;
    v[V::client_cert_fingerprint] = cert->fingerprint;
    v[V::client_cert_verify] = cert->verify;
  }
  return v;
}

// A body that came whole before the stream started: one write, repeatable on a retry; else
// streamed as it comes (next_piece()).
RequestBody Http2Stream::request_body() {
  if (streamed_) return {.kept = {}, .streamed = true, .chunked = !declared_length_, .done = false};
  return {.kept = body_};
}

bool Http2Stream::resendable() const { return http::is_idempotent(request_->verb()) && !body_consumed_; }

// An interim answer (103 Early Hints and the like; the exchange keeps a 100) as a HEADERS frame
// without END_STREAM (RFC 9113 §8.1), spliced as for an HTTP/1.1 client. nghttp2 queues it
// before the final answer: nothing to wait for here.
net::awaitable<InterimFate> Http2Stream::interim(const http::ResponseHead& head) {
  if (closed_) co_return InterimFate::client_gone;
  head_out_.clear();
  http::ResponseSplice edits;
  edits.kind = http::ResponseSplice::Kind::interim;
  http::splice_response_head(head_out_, head, edits);
  const auto nv = answer_fields(head_out_);
  if (nghttp2_submit_headers(session_.native(), NGHTTP2_FLAG_NONE, id_, nullptr, nv.data(), nv.size(), nullptr) < 0)
    co_return InterimFate::client_gone;
  session_.want_write();
  co_return InterimFate::written;
}

// A streamed body's next piece: what came, moved into the relay block (body_ grows as DATA
// arrives meanwhile), within send_timeout (the upload's deadline); its window opens once the
// origin took it (piece_sent()).
net::awaitable<UploadPiece> Http2Stream::next_piece() {
  up_.arm_body_read(snapshot_->config->server.idle_timeout);
  while (body_.empty() && !request_done_ && !closed_ && !bad_ && !timed_out_ && !too_large_) {
    wake_.expires_at(net::steady_timer::time_point::max());
    co_await wake_.async_wait(net::as_tuple(net::use_awaitable));
  }
  up_.body_read_done();
  if (too_large_) co_await send_error({413, "body too large"});
  if (closed_ || bad_ || timed_out_ || too_large_) co_return UploadPiece::ends(FailureKind::client_failed);
  if (relay_ == nullptr) relay_ = worker_.relay_blocks.acquire();
  const auto n = std::min(body_.size(), relay_block_size);
  std::memcpy(relay_, body_.data(), n);
  body_.erase(0, n);
  body_consumed_ = true;
  UploadPiece piece;
  piece.bytes = {relay_, n};
  piece.last = request_done_ && body_.empty();
  co_return piece;
}

void Http2Stream::piece_sent(std::string_view piece) { consume(piece.size()); }

}  // namespace sluice::proxy
