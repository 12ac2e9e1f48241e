// An attempt's connection (pooled, or connected here with its TLS), the request sent in one
// write, and the origin's final head. The streamed body's full duplex is in upstream_upload.cpp.
#include "sluice/proxy/upstream_exchange.hpp"

#include <cstdio>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "sluice/http/head.hpp"
#include "sluice/proxy/upstream_attempt.hpp"
#include "sluice/tls/context.hpp"
#include "sluice/tls/edge_io.hpp"

namespace sluice::proxy {

namespace net = boost::asio;
using boost::system::error_code;
using tcp = net::ip::tcp;

namespace {
constexpr auto nothrow = net::as_tuple(net::use_awaitable);
}

void UpstreamExchange::start(std::size_t max_header_bytes, const PoolAllocator<char>& blocks) {
  in_ = HeadBuffer(max_header_bytes + head_read_chunk, blocks);
}

// attempt_server()'s hooks (upstream_attempt.hpp) for one try on `ep`.
struct UpstreamExchange::AttemptHooks {
  UpstreamExchange& u;
  ClientSide& client;
  Endpoint& ep;
  Clock::time_point try_until;

  net::awaitable<Failure> connect(tls::StreamSlot& slot) { return u.connect(ep, slot, try_until); }
  void ready(tls::Stream& upstream) {
    u.active_ = &upstream;
    u.record_->upstream_ready = u.worker_.clock.now();
  }
  net::awaitable<FailureKind> send(tls::Stream& upstream, std::uint64_t& sent, std::size_t& received) {
    return u.send(client, upstream, try_until, sent, received);
  }
  unsigned status() const { return u.response_->status(); }
  void forget() {
    u.active_ = nullptr;
    u.in_.clear();
    u.forget_response();
  }
  bool resend_on_new_connection() const {
    if (!client.resendable()) return false;
    spdlog::debug("upstream {} server {}: pooled connection was closed, reconnecting",
                  u.upstream_->name(), ep.identity());
    return true;
  }
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<Failure>, AttemptHooks,
                                                     tls::StreamSlot&>::promise_type,
                               PooledFrame<Failure>>);
};

// Not a coroutine: the try's frame is attempt_server()'s alone. An upgrade takes a new connection:
// it is not resent after a pooled one turns out closed, and a tunnel consumes it anyway.
net::awaitable<Failure> UpstreamExchange::attempt(ClientSide& client, Endpoint& ep, Clock::time_point try_until) {
  slot_.reset();
  if (!upgrade_) worker_.pool.acquire(ep, slot_);
  if (slot_ && !tls_fits(ep, *slot_)) slot_.reset();
  return attempt_server(AttemptHooks{*this, client, ep, try_until}, slot_);
}

// A new connection to `ep` in `slot` (TCP, then TLS if the server has it), within
// connect_timeout and the try's time. On failure `slot` is empty.
net::awaitable<Failure> UpstreamExchange::connect(Endpoint& ep, tls::StreamSlot& slot, Clock::time_point try_until) {
  slot.emplace(worker_.io);
  active_ = &*slot;
  expire_at(std::min(try_until, worker_.clock.now() + Clock::duration(upstream_->config().connect_timeout)));
  error_code ec;
  tls::edge::open_socket(slot->socket(), ep.socket_address().protocol(), ec);  // close-on-exec
  if (!ec) std::tie(ec) = co_await slot->socket().async_connect(ep.socket_address(), nothrow);
  Failure failure;
  if (ec) {
    const bool timeout = timed(ec) == boost::beast::error::timeout;
    failure = Failure::of(timeout                                ? FailureKind::connect_timeout
                          : ec == net::error::connection_refused ? FailureKind::connect_refused
                                                                 : FailureKind::connect_error);
  } else {
    error_code ignored;
    slot->socket().set_option(tcp::no_delay(true), ignored);
    // The handshake shares the connect deadline: connect_timeout covers setting up the
    // connection, TLS included.
    if (ep.tls()) failure = co_await connect_tls(ep, *slot);
  }
  if (failure.failed()) {
    active_ = nullptr;
    slot.reset();
  }
  co_return failure;
}

// TLS on the connected `stream`, within the connect deadline already set: SNI and the name to
// verify (tls_server_name, else the server's host), then the handshake. A certificate the CA does
// not vouch for fails the attempt; there is no fallback to an unverified connection.
net::awaitable<Failure> UpstreamExchange::connect_tls(Endpoint& ep, tls::Stream& stream) {
  const Upstream& u = *upstream_;
  auto* context = u.tls_context();
  if (context == nullptr) {  // the endpoint turned TLS in a newer snapshot than this request's
    // Sluice's own state, not the server's failure: it does not count against the server.
    auto failure = Failure::of(FailureKind::tls_failed, "upstream tls handshake failed: not configured");
    failure.source = FailureSource::internal;
    co_return failure;
  }
  stream.start_tls(context->context());
  SSL* ssl = stream.tls()->native_handle();
  if (!context->prepare(ssl, u.tls_server_name(ep))) {
    co_return Failure::of(FailureKind::tls_failed, "upstream tls handshake failed: bad server name");
  }
  auto [ec] = co_await stream.async_handshake(net::ssl::stream_base::client, nothrow);
  if (!ec) co_return Failure{};
  if (timed(ec) == boost::beast::error::timeout) co_return Failure::of(FailureKind::connect_timeout);
  if (const char* why = tls::verify_error(ssl)) {
    std::snprintf(tls_failure_, sizeof tls_failure_, "upstream certificate verify failed: %s", why);
  } else {
    std::snprintf(tls_failure_, sizeof tls_failure_, "upstream tls handshake failed: %s",
                  ec.message().c_str());
  }
  spdlog::debug("upstream {} server {}: {}", u.name(), ep.identity(), tls_failure_);
  co_return Failure::of(FailureKind::tls_failed, tls_failure_);
}

// A pooled connection is reused only with the TLS settings of this request's snapshot: a reload
// that turned TLS on or off, or changed the CA or the client certificate, retires it (its
// SSL_CTX is the snapshot's ClientContext it was made with).
bool UpstreamExchange::tls_fits(const Endpoint& ep, tls::Stream& pooled) const {
  if (pooled.is_tls() != ep.tls()) return false;
  if (!pooled.is_tls()) return true;
  return upstream_->tls_context() != nullptr &&
         SSL_get_SSL_CTX(pooled.tls()->native_handle()) == upstream_->tls_context()->context().native_handle();
}

// read_final_head()'s and send_whole()'s hooks (upstream_attempt.hpp) for one attempt.
struct UpstreamExchange::HeadHooks {
  UpstreamExchange& u;
  ClientSide& client;
  Clock::time_point try_until;
  std::size_t& received_bytes;

  http::ResponseHead& index() { return u.response_index(); }
  std::optional<FailureKind> complete(http::ResponseHead& head) {
    u.response_ = &head;
    return u.final_head(client, head);
  }
  // An interim head goes to the client side; the head's deadline runs again after its write.
  net::awaitable<bool> interim(const http::ResponseHead& head) { return u.pass_interim(client, head, try_until); }
  void received(std::size_t n) {
    if (received_bytes == 0 && n > 0) u.record_->first_byte = u.worker_.clock.now();
    received_bytes += n;
  }
  // While uploading, the upload may fail on the client's side: nothing more to read then.
  bool client_gone() const { return u.upload_ != nullptr && u.upload_->client_failed; }
  error_code timed(error_code ec) const { return u.timed(ec); }
  void arm_response() { u.arm_response(try_until); }
  static_assert(std::is_same_v<std::coroutine_traits<net::awaitable<FailureKind>, HeadHooks, tls::Stream&,
                                                     HeadBuffer&, std::size_t>::promise_type,
                               PooledFrame<FailureKind>>);
};

net::awaitable<bool> UpstreamExchange::pass_interim(ClientSide& client, const http::ResponseHead& head,
                                                    Clock::time_point try_until) {
  if (head.status() != 100) {  // a 100 answered the origin's own framing: nothing to pass on
    const auto fate = co_await client.interim(head);  // not inside the if: GCC 12 miscompiles it
    if (fate == InterimFate::client_gone || (upload_ != nullptr && upload_->client_failed)) co_return false;
    if (fate == InterimFate::written) arm_response(try_until);
  }
  response_ = nullptr;
  co_return true;
}

// Head and body towards the origin, then the response head. A body still to be read from the
// client streams while the answer is read (full duplex); else one write, repeatable on a retry.
net::awaitable<FailureKind> UpstreamExchange::send(ClientSide& client, tls::Stream& upstream,
                                                   Clock::time_point try_until, std::uint64_t& sent,
                                                   std::size_t& received) {
  request_unsent_ = false;
  const auto head = client.forward_head();
  const auto body = client.request_body();
  if (body.streamed) return send_streamed(client, upstream, head, body, try_until, sent, received);
  const std::array<net::const_buffer, 2> out{net::buffer(head), net::buffer(body.kept)};
  expire_at(try_until);
  return send_whole(HeadHooks{*this, client, try_until, received}, upstream, out, in_, max_header_bytes_, sent);
}

// Reads the response head (passing interim 1xx heads to the client side) into response_. Not a
// coroutine: the phase is read_final_head()'s frame alone.
net::awaitable<FailureKind> UpstreamExchange::read_head(ClientSide& client, tls::Stream& upstream,
                                                        Clock::time_point try_until, std::size_t& received) {
  arm_response(try_until);
  return read_final_head(HeadHooks{*this, client, try_until, received}, upstream, in_, max_header_bytes_);
}

// A complete response head: the attempt's outcome when it is a final answer (none; a 101 only as
// the answer to an upgrade the client side forwarded, else a bad response), nullopt for an
// interim 1xx.
std::optional<FailureKind> UpstreamExchange::final_head(ClientSide& client, const http::ResponseHead& head) const {
  const auto code = head.status();
  if (code < 100 || code >= 200) return FailureKind::none;
  if (code != 101) return std::nullopt;
  return upgrade_ && client.accepts_switch(head) ? FailureKind::none : FailureKind::bad_response;
}

// The exchange's response index, in the arena: made once, reused by every head of the exchange.
http::ResponseHead& UpstreamExchange::response_index() {
  if (response_store_ == nullptr) {
    response_store_ = new (arena_.allocate(sizeof(http::ResponseHead), alignof(http::ResponseHead)))
        http::ResponseHead;
  }
  return *response_store_;
}

std::string_view UpstreamExchange::retry_after() const noexcept {
  return response_ != nullptr ? response_->value("Retry-After") : std::string_view();
}

void UpstreamExchange::deliver_done(Endpoint& ep, bool reusable, std::optional<std::chrono::seconds> origin_idle) {
  active_ = nullptr;
  if (reusable) {
    const auto& config = upstream_->config();
    worker_.pool.release(ep, std::move(slot_), config.keepalive,
                         pooled_idle_time(config.keepalive_timeout, origin_idle));
  }
  slot_.reset();
  in_.clear();
}

void UpstreamExchange::drop() noexcept {
  active_ = nullptr;
  slot_.reset();
  in_.clear();
  forget_response();
}

tls::Stream UpstreamExchange::take_stream() noexcept {
  active_ = nullptr;
  tls::Stream stream = std::move(*slot_);
  slot_.reset();
  return stream;
}

void UpstreamExchange::end() noexcept {
  forget_response();
  if (response_store_ != nullptr) {
    static_assert(std::is_trivially_destructible_v<http::ResponseHead>);
    arena_.deallocate(response_store_, alignof(http::ResponseHead));  // a no-op inside the block
    response_store_ = nullptr;
  }
}

void UpstreamExchange::release_buffer() {
  if (in_.size() == 0) in_.shrink_to_fit();
}

void UpstreamExchange::cancel() noexcept {
  error_code ignored;
  if (active_ != nullptr) active_->cancel(ignored);
}

void UpstreamExchange::close() noexcept {
  error_code ignored;
  if (active_ != nullptr) active_->close(ignored);
}

}  // namespace sluice::proxy
