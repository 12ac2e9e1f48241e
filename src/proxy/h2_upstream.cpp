// HTTP/2 to the servers: nghttp2's client session over one connection, the calls it carries, the
// worker's list of connections per server, and connecting (TLS with ALPN h2 for protocol h2).
#include "sluice/proxy/h2_upstream.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <spdlog/spdlog.h>

#include "sluice/tls/context.hpp"
#include "sluice/tls/edge_io.hpp"
#include "sluice/upstream/upstream.hpp"

namespace sluice::proxy {

namespace net = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);
constexpr std::size_t read_size = 16 * 1024;
constexpr std::size_t write_gather = 64 * 1024;

H2Connection& self(void* user_data) { return *static_cast<H2Connection*>(user_data); }

H2Call* call_of(nghttp2_session* session, std::int32_t id) {
  return static_cast<H2Call*>(nghttp2_session_get_stream_user_data(session, id));
}

int on_header(nghttp2_session* session, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
              const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void*) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto* c = call_of(session, frame->hd.stream_id);
  if (c == nullptr) return 0;
  // A head past its bound: nghttp2 resets the stream (the call sees head_too_large()).
  const bool kept = c->on_header({reinterpret_cast<const char*>(name), namelen},
                                 {reinterpret_cast<const char*>(value), valuelen},
                                 frame->headers.cat == NGHTTP2_HCAT_HEADERS && c->head_done());
  return kept ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

int on_data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t id, const std::uint8_t* data, std::size_t len,
                  void*) {
  if (auto* c = call_of(session, id)) c->on_data({reinterpret_cast<const char*>(data), len});
  else nghttp2_session_consume(session, id, len);  // a call gone: its window comes back
  return 0;
}

int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  return self(user_data).frame_received(*frame);
}

int on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user_data) {
  return self(user_data).stream_closed(id, code);
}

// The call is looked up by its stream, not taken from the source: a call reset meanwhile is gone.
ssize_t read_upload_cb(nghttp2_session* session, std::int32_t id, std::uint8_t* buf, std::size_t length,
                       std::uint32_t* flags, nghttp2_data_source*, void*) {
  auto* c = call_of(session, id);
  if (c == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  return c->read_upload(buf, length, flags);
}

}  // namespace

// ---- the call

bool H2Call::open(std::shared_ptr<H2Connection> conn, std::span<const nghttp2_nv> fields, bool has_body) {
  const auto id = conn->submit(*this, fields, has_body);
  if (id <= 0) return false;
  conn_ = std::move(conn);
  id_ = id;
  opened_ = true;
  conn_->want_write();
  return true;
}

void H2Call::offer(std::string_view piece, bool last) {
  out_ = piece;
  out_last_ = last;
  if (conn_ != nullptr && !closed_) conn_->resume(id_);
}

ssize_t H2Call::read_upload(std::uint8_t* buf, std::size_t length, std::uint32_t* flags) {
  const auto n = std::min(length, out_.size());
  if (n != 0) std::memcpy(buf, out_.data(), n);  // an empty piece may have no data() at all
  out_.remove_prefix(n);
  if (out_.empty() && out_last_) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    out_eof_ = true;
    if (out_trailers_ != nullptr && !out_trailers_->empty()) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      std::vector<nghttp2_nv> nv;
      for (const auto& f : *out_trailers_)
        if (!connection_specific_field(f.name)) nv.push_back(h2_field(f.name, f.value));
      nghttp2_submit_trailer(conn_->native(), id_, nv.data(), nv.size());
    }
  }
  if (out_.empty()) upload_wake_.cancel();
  if (n == 0 && !out_eof_) return NGHTTP2_ERR_DEFERRED;
  return static_cast<ssize_t>(n);
}

void H2Call::reset(std::uint32_t code) noexcept {
  if (conn_ == nullptr) return;
  conn_->forget(*this, id_, closed_ ? 0 : code);
  conn_.reset();
  closed_ = true;
  wake();
}

void H2Call::take(std::size_t n) {
  body_.erase(0, n);
  if (conn_ != nullptr && !closed_) conn_->consume(id_, n);
}

net::awaitable<void> H2Call::wait() {
  wake_.expires_at(net::steady_timer::time_point::max());
  co_await wake_.async_wait(nothrow);
}

net::awaitable<void> H2Call::wait_upload() {
  upload_wake_.expires_at(net::steady_timer::time_point::max());
  co_await upload_wake_.async_wait(nothrow);
}

net::awaitable<bool> H2Call::wait_upload_until(Clock::time_point until) {
  upload_wake_.expires_at(until);
  auto [ec] = co_await upload_wake_.async_wait(nothrow);
  co_return !ec;
}

// A field of the answer's head (pseudo-header :status), of an interim head (dropped), or of its
// trailers.
bool H2Call::on_header(std::string_view name, std::string_view value, bool trailer) {
  if (name == ":status") head_bytes_ = 0;  // each head (an interim one, the final one) on its own
  head_bytes_ += name.size() + value.size() + 4;
  if (head_limit_ != 0 && head_bytes_ > head_limit_) {
    head_too_large_ = true;
    if (!trailer) status_ = 0;  // no head: the try failed (bad response), nothing to answer with
    return false;
  }
  if (trailer) {
    trailers_.push_back({std::string(name), std::string(value)});
    return true;
  }
  if (name == ":status") {
    const unsigned code = value.size() == 3 ? static_cast<unsigned>(std::atoi(std::string(value).c_str())) : 0;
    interim_ = code >= 100 && code < 200;
    if (!interim_) status_ = code;
    if (!interim_) fields_.clear();
    return true;
  }
  if (!interim_ && !name.starts_with(':')) fields_.push_back({std::string(name), std::string(value)});
  return true;
}

void H2Call::on_head_end(bool end_stream) {
  interim_ = false;
  head_bytes_ = 0;  // the trailers' own count starts
  if (end_stream) ended_ = true;
  wake_.cancel();
  upload_wake_.cancel();  // an upload under way sees the answer (a server may answer before it read all)
}

void H2Call::on_data(std::string_view data) {
  body_.append(data);  // within the stream's window: take() opens it again
  wake_.cancel();
}

void H2Call::on_end() noexcept {
  ended_ = true;
  wake_.cancel();
}

void H2Call::on_close(std::uint32_t code) noexcept {
  closed_ = true;
  close_code_ = code;
  conn_.reset();
  wake();
}

// ---- the connection

H2Connection::H2Connection(net::any_io_executor executor, std::shared_ptr<Endpoint> endpoint,
                           Clock::duration idle_timeout, Clock::duration ping_timeout, std::uint32_t window)
    : stream_(executor), endpoint_(std::move(endpoint)), endpoint_id_(endpoint_->id()), idle_timeout_(idle_timeout),
      ping_timeout_(ping_timeout), window_(window), write_wake_(executor), ready_wake_(executor) {}

void H2Connection::connected(const Failure& failure) {
  connecting_ = false;
  failure_ = failure;
  if (failure.failed()) {
    dead_ = true;
    error_code ignored;
    stream_.close(ignored);
  } else {
    start();
    endpoint_->h2_connection_opened();
    counted_ = true;
  }
  ready_wake_.cancel();
}

void H2Connection::uncount() noexcept {
  if (counted_) endpoint_->h2_connection_closed();
  counted_ = false;
}

net::awaitable<void> H2Connection::wait_ready() {
  ready_wake_.expires_at(net::steady_timer::time_point::max());
  co_await ready_wake_.async_wait(nothrow);
}

H2Connection::~H2Connection() {
  uncount();
  if (session_ != nullptr) nghttp2_session_del(session_);
}

// Our SETTINGS: no push, each stream's window; the connection's window as large as the streams'
// together may need (each stream is bounded by its own).
void H2Connection::start() {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  session_ = new_h2_session(H2Side::client, cb, this);
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window_},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 1 << 30);
  auto me = shared_from_this();
  net::co_spawn(stream_.get_executor(), read_loop(me), net::detached);
  net::co_spawn(stream_.get_executor(), write_loop(me), net::detached);
}

// While it is being made, the server's limit is not known yet: RFC 9113 §6.5.2 recommends it be
// no smaller than 100, so as many calls wait for it before another connection is made.
bool H2Connection::has_room() const noexcept {
  if (dead_ || goaway_ || ping_out_) return false;
  if (connecting_) return reserved_ < 100;
  const auto max = nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  return calls_.size() + reserved_ < max && nghttp2_session_get_next_stream_id(session_) < (1u << 31) - 2;
}

std::int32_t H2Connection::submit(H2Call& call, std::span<const nghttp2_nv> fields, bool has_body) {
  if (dead_ || goaway_ || connecting_) return -1;
  nghttp2_data_provider provider{};
  provider.source.ptr = &call;
  provider.read_callback = read_upload_cb;
  const auto id = nghttp2_submit_request(session_, nullptr, fields.data(), fields.size(),
                                         has_body ? &provider : nullptr, &call);
  if (id > 0) calls_.push_back(&call);
  return id;
}

void H2Connection::forget(H2Call& call, std::int32_t id, std::uint32_t reset_code) noexcept {
  std::erase(calls_, &call);
  if (dead_) return;
  nghttp2_session_set_stream_user_data(session_, id, nullptr);
  if (reset_code != 0) nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, reset_code);
  want_write();
}

void H2Connection::consume(std::int32_t id, std::size_t n) {
  if (dead_ || n == 0) return;
  nghttp2_session_consume(session_, id, n);
  want_write();
}

void H2Connection::resume(std::int32_t id) {
  if (dead_) return;
  nghttp2_session_resume_data(session_, id);
  want_write();
}

void H2Connection::want_write() noexcept {
  if (!writing_) write_wake_.cancel();
}

int H2Connection::frame_received(const nghttp2_frame& frame) {
  if (frame.hd.type == NGHTTP2_PING && (frame.hd.flags & NGHTTP2_FLAG_ACK) != 0) {
    ping_out_ = false;
    return 0;
  }
  if (frame.hd.type == NGHTTP2_GOAWAY) {
    // Streams above its last-stream-id are closed by nghttp2 with REFUSED_STREAM: never processed.
    if (!goaway_) endpoint_->h2_goaway_received();
    goaway_ = true;
    return 0;
  }
  auto* c = call_of(session_, frame.hd.stream_id);
  if (c == nullptr) return 0;
  const bool end_stream = (frame.hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (frame.hd.type == NGHTTP2_HEADERS && frame.headers.cat == NGHTTP2_HCAT_RESPONSE) c->on_head_end(end_stream);
  else if (end_stream && (frame.hd.type == NGHTTP2_HEADERS || frame.hd.type == NGHTTP2_DATA)) c->on_end();
  return 0;
}

int H2Connection::stream_closed(std::int32_t id, std::uint32_t code) {
  auto* c = call_of(session_, id);
  if (c == nullptr) return 0;
  nghttp2_session_set_stream_user_data(session_, id, nullptr);
  std::erase(calls_, c);
  c->on_close(code);
  want_write();  // the writer's wait re-arms: with no call left, the idle timeout runs
  return 0;
}

// The connection is lost: every call on it ends (a call whose stream had not started counts as
// never processed only when the server said so).
void H2Connection::fail_all() noexcept {
  dead_ = true;
  uncount();
  error_code ignored;
  stream_.close(ignored);
  write_wake_.cancel();
  auto calls = std::move(calls_);
  for (auto* c : calls) c->on_close(NGHTTP2_INTERNAL_ERROR);
}

net::awaitable<void> H2Connection::read_loop(std::shared_ptr<H2Connection> /*keeps the connection alive*/) {
  std::string buffer(read_size, '\0');
  while (!dead_) {
    auto [ec, n] = co_await stream_.async_read_some(net::buffer(buffer), nothrow);
    if (ec || n == 0) break;
    const auto rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(buffer.data()), n);
    if (rv < 0) {
      spdlog::debug("upstream HTTP/2: {}", nghttp2_strerror(static_cast<int>(rv)));
      break;
    }
    want_write();
    if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) break;
  }
  fail_all();
}

net::awaitable<void> H2Connection::write_loop(std::shared_ptr<H2Connection> /*keeps the connection alive*/) {
  while (!dead_) {
    out_.clear();
    gather_h2_frames(session_, out_, write_gather);
    if (out_.empty()) {
      writing_ = false;
      if (!co_await wait_idle()) break;
      continue;
    }
    writing_ = true;
    auto [ec, written] = co_await net::async_write(stream_, net::buffer(out_), nothrow);
    writing_ = false;
    if (ec) break;
  }
  fail_all();
}

// With calls: until there is something to write. Idle (no call, every wake starting the wait
// again): half the idle time, then one PING; its ACK within ping_timeout_ (else the connection is
// dead), then the other half, and the connection closes.
net::awaitable<bool> H2Connection::wait_idle() {
  if (!calls_.empty()) {
    pinged_ = false;
    write_wake_.expires_after(Clock::duration::max() / 2);
    co_await write_wake_.async_wait(nothrow);
    co_return true;
  }
  write_wake_.expires_after(ping_out_ ? ping_timeout_ : idle_timeout_ / 2);
  auto [ec] = co_await write_wake_.async_wait(nothrow);
  if (ec || !calls_.empty()) co_return true;
  if (ping_out_) {
    fail_all();  // closed (and no longer counted) before the warning says so
    spdlog::warn("server {}: HTTP/2 connection closed: PING unanswered within {} ms", endpoint_->identity(),
                 std::chrono::duration_cast<std::chrono::milliseconds>(ping_timeout_).count());
    co_return false;
  }
  if (pinged_) co_return false;
  nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, nullptr);
  pinged_ = ping_out_ = true;
  co_return true;
}

// ---- the worker's connections

std::shared_ptr<H2Connection> H2Connections::find(const Endpoint& ep) {
  if (ep.id() >= by_endpoint_.size()) return nullptr;
  auto& list = by_endpoint_[ep.id()];
  std::erase_if(list, [](const auto& c) { return !c->alive(); });
  for (auto& c : list)
    if (c->has_room()) return c;
  return nullptr;
}

void H2Connections::add(const Endpoint& ep, std::shared_ptr<H2Connection> conn) {
  if (ep.id() >= by_endpoint_.size()) by_endpoint_.resize(ep.id() + 1);
  by_endpoint_[ep.id()].push_back(std::move(conn));
}

std::size_t H2Connections::count(const Endpoint& ep) const {
  if (ep.id() >= by_endpoint_.size()) return 0;
  const auto& list = by_endpoint_[ep.id()];
  return static_cast<std::size_t>(std::count_if(list.begin(), list.end(), [](const auto& c) { return c->alive(); }));
}

// ---- the request's fields


bool h2_request_fields(std::string_view head, std::string_view scheme, bool te_trailers, std::string& text,
                       std::vector<nghttp2_nv>& out) {
  out.clear();
  text.assign(head);
  const auto line_end = head.find("\r\n");
  const auto sp1 = head.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : head.find(' ', sp1 + 1);
  if (line_end == std::string_view::npos || sp2 == std::string_view::npos || sp2 > line_end) return false;
  out.push_back(h2_field(":method", head.substr(0, sp1)));
  out.push_back(h2_field(":scheme", scheme));
  out.push_back(h2_field(":authority", {}));  // filled from Host below
  out.push_back(h2_field(":path", head.substr(sp1 + 1, sp2 - sp1 - 1)));
  for (auto at = line_end + 2; at < head.size();) {
    const auto end = head.find("\r\n", at);
    const auto colon = head.find(':', at);
    if (end == std::string_view::npos || end == at || colon == std::string_view::npos || colon > end) break;
    auto value_at = colon + 1;
    while (value_at < end && (head[value_at] == ' ' || head[value_at] == '\t')) ++value_at;
    for (auto i = at; i < colon; ++i) text[i] = ascii_lower(text[i]);
    const std::string_view name = std::string_view(text).substr(at, colon - at);
    const auto value = head.substr(value_at, end - value_at);
    if (name == "host") out[2] = h2_field(":authority", value);
    else if (name != "te" && !connection_specific_field(name)) out.push_back(h2_field(name, value));
    at = end + 2;
  }
  if (te_trailers) out.push_back(h2_field("te", "trailers"));
  return true;
}

// ---- connecting

namespace {

net::awaitable<Failure> h2_tls(const Upstream& u, Endpoint& ep, tls::Stream& stream) {
  auto* context = u.tls_context();
  if (context == nullptr) co_return Failure::of(FailureKind::tls_failed, "upstream tls handshake failed: not configured");
  stream.start_tls(context->context());
  SSL* ssl = stream.tls()->native_handle();
  static constexpr unsigned char alpn[] = {2, 'h', '2'};
  if (!context->prepare(ssl, u.tls_server_name(ep)) || SSL_set_alpn_protos(ssl, alpn, sizeof alpn) != 0)
    co_return Failure::of(FailureKind::tls_failed, "upstream tls handshake failed: bad server name");
  auto [ec] = co_await stream.async_handshake(net::ssl::stream_base::client, nothrow);
  if (ec == net::error::operation_aborted) co_return Failure::of(FailureKind::connect_timeout);
  if (ec) {
    const char* why = tls::verify_error(ssl);
    co_return Failure::of(FailureKind::tls_failed,
                          why != nullptr ? "upstream certificate verify failed" : "upstream tls handshake failed");
  }
  const unsigned char* chosen = nullptr;
  unsigned chosen_len = 0;
  SSL_get0_alpn_selected(ssl, &chosen, &chosen_len);
  if (std::string_view(reinterpret_cast<const char*>(chosen), chosen_len) != "h2")
    co_return Failure::of(FailureKind::tls_failed, "upstream did not choose h2 by ALPN");
  co_return Failure{};
}

}  // namespace

net::awaitable<Failure> connect_h2(const Upstream& u, Endpoint& ep, tls::Stream& stream) {
  error_code ec;
  tls::edge::open_socket(stream.socket(), ep.socket_address().protocol(), ec);
  if (!ec) std::tie(ec) = co_await stream.socket().async_connect(ep.socket_address(), nothrow);
  if (ec == net::error::operation_aborted) co_return Failure::of(FailureKind::connect_timeout);
  if (ec) co_return Failure::of(ec == net::error::connection_refused ? FailureKind::connect_refused : FailureKind::connect_error);
  error_code ignored;
  stream.socket().set_option(net::ip::tcp::no_delay(true), ignored);
  if (u.config().protocol == config::UpstreamProtocol::h2) co_return co_await h2_tls(u, ep, stream);
  co_return Failure{};
}

}  // namespace sluice::proxy
