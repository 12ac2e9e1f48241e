// The HTTP/2 connection: nghttp2's server session over our socket (its reads fed to
// nghttp2_session_mem_recv, what it has to send written by one writer coroutine), its callbacks
// handing each stream's events to the stream, and the connection's life (idle, shutdown,
// early-reset budget).
#include "sluice/proxy/h2_session.hpp"

#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

#include "sluice/core/per_worker.hpp"
#include "sluice/proxy/h2_stream.hpp"
#include "sluice/proxy/h2_upstream.hpp"

namespace sluice::proxy {

namespace net = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);
constexpr std::size_t write_gather = 64 * 1024;  // frames gathered into one write at most
constexpr std::size_t small_write = 4 * 1024;    // kept between writes
// Between the shutdown notice and the GOAWAY naming the last stream: a round trip on any network
// the client may be on (nghttpx and Envoy wait about as long).
constexpr auto goaway_delay = std::chrono::seconds(1);

PerWorker<Http2Counters>& counters() noexcept {
  static PerWorker<Http2Counters> per_worker;
  return per_worker;
}

void bump(std::atomic<std::uint64_t>& c) noexcept { add_own(c, std::uint64_t{1}); }

Http2Session& self(void* user_data) { return *static_cast<Http2Session*>(user_data); }

Http2Stream* stream_of(nghttp2_session* session, std::int32_t id) {
  return static_cast<Http2Stream*>(nghttp2_session_get_stream_user_data(session, id));
}

int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  return self(user_data).begin_headers(*frame);
}

int on_header(nghttp2_session* session, const nghttp2_frame* frame, const std::uint8_t* name,
              std::size_t namelen, const std::uint8_t* value, std::size_t valuelen, std::uint8_t,
              void*) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto* s = stream_of(session, frame->hd.stream_id);
  if (s == nullptr) return 0;
  const std::string_view n(reinterpret_cast<const char*>(name), namelen), v(reinterpret_cast<const char*>(value), valuelen);
  // A HEADERS frame after the request's head carries its trailers (RFC 9113 §8.1).
  if (frame->headers.cat == NGHTTP2_HCAT_HEADERS) s->on_trailer(n, v);
  else s->on_header(n, v);
  return 0;
}

int on_data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                  std::size_t len, void*) {
  if (auto* s = stream_of(session, id)) s->on_data({reinterpret_cast<const char*>(data), len});
  else nghttp2_session_consume_connection(session, len);  // a stream gone: the window comes back
  return 0;
}

// nghttp2 found the stream malformed (a field, or content-length against the DATA) and queued
// its RST_STREAM(PROTOCOL_ERROR): the stream must not start, or stops.
// A frame nghttp2 refused (a stream it reset, MadeYouReset's way to make a server reset streams
// without the client's reset counting): the stream is done, and the connection takes a glitch.
int on_invalid_frame(nghttp2_session* session, const nghttp2_frame* frame, int, void* user_data) {
  if (auto* s = stream_of(session, frame->hd.stream_id)) s->invalid();
  self(user_data).glitch(Http2Glitch::invalid_frame);
  return 0;
}

int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  return self(user_data).frame_received(*frame);
}

int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  return self(user_data).frame_sent(*frame);
}

int on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t error_code, void* user_data) {
  return self(user_data).stream_closed(id, error_code);
}

}  // namespace

Http2Counters& http2_counters(unsigned worker) noexcept { return counters()[worker]; }

std::uint64_t http2_total(std::atomic<std::uint64_t> Http2Counters::*field) noexcept {
  std::uint64_t total = 0;
  std::as_const(counters()).for_each([&](const Http2Counters& c) { total += (c.*field).load(std::memory_order_relaxed); });
  return total;
}

namespace {

// Opened minus closed, each counted by its worker (and summed at slightly different moments).
std::uint64_t open_now(std::atomic<std::uint64_t> Http2Counters::*opened,
                       std::atomic<std::uint64_t> Http2Counters::*closed) noexcept {
  const auto o = http2_total(opened);
  const auto c = http2_total(closed);
  return o > c ? o - c : 0;
}

}  // namespace

std::uint64_t http2_open_connections() noexcept {
  return open_now(&Http2Counters::connections, &Http2Counters::connections_closed);
}

std::uint64_t http2_open_streams() noexcept { return open_now(&Http2Counters::streams, &Http2Counters::streams_closed); }

std::uint64_t http2_reset_total(bool sent, std::size_t reason) noexcept {
  std::uint64_t total = 0;
  std::as_const(counters()).for_each([&](const Http2Counters& c) {
    total += c.resets[sent ? 1 : 0][reason].load(std::memory_order_relaxed);
  });
  return total;
}

std::uint64_t http2_glitch_total(Http2Glitch kind) noexcept {
  std::uint64_t total = 0;
  std::as_const(counters()).for_each([&](const Http2Counters& c) {
    total += c.glitches[static_cast<std::size_t>(kind)].load(std::memory_order_relaxed);
  });
  return total;
}

Http2Session::Http2Session(WorkerContext& worker, Http2Handoff handoff)
    : worker_(worker), client_(std::move(handoff.client)), client_address_(handoff.client_address),
      client_ip_(std::move(handoff.client_ip)), tls_(std::move(handoff.tls)),
      received_(std::move(handoff.received)), client_cert_(std::move(handoff.client_cert)), write_wake_(worker.io),
      done_wake_(worker.io), goaway_timer_(worker.io) {
  worker_.sessions.push_back(*this);
}

Http2Session::~Http2Session() {
  auto& counted = http2_counters(worker_.index);
  while (!streams_.empty()) {
    auto& s = static_cast<Http2Stream&>(streams_.front());
    streams_.pop_front();
    delete &s;
    bump(counted.streams_closed);
  }
  if (session_ != nullptr) bump(counted.connections_closed);
  if (session_ != nullptr) nghttp2_session_del(session_);
  if (is_linked()) worker_.sessions.erase(worker_.sessions.iterator_to(*this));
}

// The server session with its callbacks, and our SETTINGS (RFC 9113 §6.5.2): the limits a client
// must keep to, from [server]. Past the streams we announce, nghttp2 refuses new ones itself
// (RST_STREAM(REFUSED_STREAM), before we see them).
void Http2Session::open_session() {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, on_invalid_frame);
  // Windows open as the streams hand their bytes on (Http2Stream::consume()).
  session_ = new_h2_session(H2Side::server, cb, this);
  const auto& server = worker_.snapshot->config->server;
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, server.http2_max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, server.http2_initial_window_bytes},
      {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, server.http2_header_table_bytes},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(server.max_header_bytes)},
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  max_early_resets_ = server.http2_max_early_resets;
  max_glitches_ = server.http2_max_glitches;
  requests_left_ = server.http2_max_requests;
  idle_timeout_ = server.idle_timeout;
}

net::awaitable<void> Http2Session::run() {
  open_session();
  bump(http2_counters(worker_.index).connections);
  // A connection accepted while shutting down is told at once (its first stream still served).
  if (worker_.is_stopping()) close_if_idle();
  deadline = worker_.clock.now() + worker_.snapshot->config->server.header_timeout;
  net::co_spawn(worker_.io, write_loop(), net::detached);
  if (feed(received_)) co_await read_loop();
  received_ = std::string();
  // What nghttp2 still has to say (a GOAWAY) is written, then the connection closes.
  finishing_ = true;
  want_write();
  while (!writer_done_) {
    done_wake_.expires_at(net::steady_timer::time_point::max());
    co_await done_wake_.async_wait(nothrow);
  }
  close();
  co_await wait_streams();
  deadline = Clock::time_point::max();
}

// An idle connection holds no read buffer: a plain one waits for bytes first, then reads them
// into one of the worker's blocks, given back once nghttp2 has them. (With TLS the engine may
// hold decrypted bytes the kernel does not show: the read itself waits, its block taken.)
net::awaitable<void> Http2Session::read_loop() {
  auto& blocks = worker_.arena_blocks;
  while (!closed_ && !finishing_) {
    error_code ec;
    if (!client_.is_tls()) {
      co_await client_.readable(ec);
      if (ec || closed_ || finishing_) break;
    }
    char* block = blocks.acquire();
    const auto buffer = net::buffer(block, blocks.block_size());
    std::size_t n = client_.try_read_some(buffer);
    if (n == 0) std::tie(ec, n) = co_await client_.async_read_some(buffer, nothrow);
    const bool more = !ec && n > 0 && feed({block, n});
    blocks.release(block);
    if (!more) break;
    if (streams_.empty()) arm_idle();
  }
}

// The client's bytes to nghttp2; false: the connection is done (a protocol error, whose GOAWAY
// nghttp2 has queued, or nothing more to read).
bool Http2Session::feed(std::string_view bytes) {
  if (!bytes.empty()) {
    const auto rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    if (rv < 0) {
      spdlog::debug("client {}: HTTP/2: {}", client_ip_, nghttp2_strerror(static_cast<int>(rv)));
      return false;
    }
  }
  want_write();  // and the streams whose requests came start then (start_streams())
  return nghttp2_session_want_read(session_) != 0 || nghttp2_session_want_write(session_) != 0;
}

net::awaitable<void> Http2Session::write_loop() {
  while (!closed_) {
    write_wanted_ = false;
    out_.clear();
    gather_h2_frames(session_, out_, write_gather);
    start_streams();
    if (out_.empty()) {
      // A stream started just now (start_streams() runs its coroutine at once) may have
      // submitted its answer after the pass above: another pass, not a wait.
      if (std::exchange(write_wanted_, false)) continue;
      check_done();
      if (finishing_ || closed_) break;
      writing_ = false;
      // A connection waiting for more to send keeps no large write buffer (a big answer's), and
      // an idle one none at all.
      if (streams_.empty() || out_.capacity() > small_write) out_ = std::string();
      write_wake_.expires_at(net::steady_timer::time_point::max());
      co_await write_wake_.async_wait(nothrow);
      continue;
    }
    writing_ = true;
    auto [ec, written] = co_await net::async_write(client_, net::buffer(out_), nothrow);
    if (ec) break;
  }
  writing_ = false;
  writer_done_ = true;
  finishing_ = true;
  error_code ignored;
  client_.cancel(ignored);  // the reader stops
  done_wake_.cancel();
}

void Http2Session::want_write() noexcept {
  write_wanted_ = true;
  if (!writing_) write_wake_.cancel();
}

// Nothing to read or write any more (GOAWAY exchanged and every stream closed): the reader stops.
void Http2Session::check_done() noexcept {
  if (nghttp2_session_want_read(session_) != 0 || nghttp2_session_want_write(session_) != 0) return;
  finishing_ = true;
  error_code ignored;
  client_.cancel(ignored);
}

void Http2Session::arm_idle() noexcept {
  deadline = worker_.clock.now() + idle_timeout_;
  timed_out_ = false;
}

// While streams are open the connection is looked at every tick and each stream's own deadline
// enforced (a stream whose client does not take its answer for idle_timeout is reset); idle (no
// stream) past idle_timeout, it says GOAWAY and closes.
void Http2Session::expire() {
  if (!streams_.empty()) {
    const auto now = worker_.clock.now();
    for (auto it = streams_.begin(); it != streams_.end();) {
      auto& s = *it++;
      if (s.deadline <= now) s.expire();
    }
    return;
  }
  // A client that does not take the GOAWAY within a second (its window, or its socket, full)
  // is closed outright.
  if (std::exchange(timed_out_, true)) return close();
  deadline = worker_.clock.now() + std::chrono::seconds(1);
  nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
  want_write();
}

// Graceful shutdown (RFC 9113 §6.8): a first GOAWAY with the largest stream id tells the client
// to open no more streams; a second later (final_goaway()), once streams the client opened
// meanwhile have arrived, names the last stream we took. Those streams finish, nghttp2 refuses
// any later one, and the connection ends when the last closes.
void Http2Session::close_if_idle() {
  if (session_ == nullptr || closed_ || draining_) return;
  draining_ = true;
  nghttp2_submit_shutdown_notice(session_);
  want_write();
  ++running_;
  net::co_spawn(worker_.io, final_goaway(), net::detached);
}

net::awaitable<void> Http2Session::final_goaway() {
  goaway_timer_.expires_after(goaway_delay);
  co_await goaway_timer_.async_wait(nothrow);
  if (!closed_) {
    nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
                          NGHTTP2_NO_ERROR, nullptr, 0);
    want_write();
  }
  if (--running_ == 0) done_wake_.cancel();
}

void Http2Session::close() {
  if (!closed_) {
    closed_ = true;
    error_code ignored;
    client_.shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    client_.close(ignored);
  }
  write_wake_.cancel();
  goaway_timer_.cancel();
  for (auto& s : streams_) s.close();
}

bool Http2Session::holds_upstream() const noexcept {
  for (const auto& s : streams_)
    if (s.holds_upstream()) return true;
  return false;
}

// ---- nghttp2's callbacks

int Http2Session::begin_headers(const nghttp2_frame& frame) {
  if (frame.hd.type != NGHTTP2_HEADERS || frame.headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  bump(http2_counters(worker_.index).streams);
  auto* s = new Http2Stream(*this, frame.hd.stream_id);
  streams_.push_back(*s);
  nghttp2_session_set_stream_user_data(session_, frame.hd.stream_id, s);
  deadline = Clock::time_point::min();  // streams open: looked at every tick
  if (requests_left_ != 0 && --requests_left_ == 0) last_request(frame.hd.stream_id);
  return 0;
}

// http2_max_requests reached: one GOAWAY naming this stream as the last one taken. The streams
// open finish; nghttp2 ignores later ones, which the client may send again on a new connection
// (RFC 9113 §6.8: they were not processed); the connection ends when the last stream closes.
void Http2Session::last_request(std::int32_t id) {
  if (draining_) return;
  draining_ = true;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR, nullptr, 0);
  want_write();
}

int Http2Session::frame_received(const nghttp2_frame& frame) {
  if (frame.hd.type == NGHTTP2_RST_STREAM) count_reset(false, frame.rst_stream.error_code);
  if (is_glitch(frame)) return 0;
  auto* s = stream_of(session_, frame.hd.stream_id);
  if (s == nullptr) return 0;
  const bool end_stream = (frame.hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (frame.hd.type == NGHTTP2_HEADERS && frame.headers.cat == NGHTTP2_HCAT_REQUEST) s->on_headers_end(end_stream);
  else if (frame.hd.type == NGHTTP2_RST_STREAM && !s->answered()) early_reset();
  if (end_stream && (frame.hd.type == NGHTTP2_HEADERS || frame.hd.type == NGHTTP2_DATA)) s->on_request_end();
  return 0;
}

// Our answer ended its stream while the client is still sending (an early refusal): RST_STREAM
// (NO_ERROR) tells it to stop (RFC 9113 §8.1).
int Http2Session::frame_sent(const nghttp2_frame& frame) {
  if (frame.hd.type == NGHTTP2_RST_STREAM) count_reset(true, frame.rst_stream.error_code);
  if (frame.hd.type == NGHTTP2_GOAWAY) bump(http2_counters(worker_.index).goaways_sent);
  if ((frame.hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) return 0;
  if (frame.hd.type != NGHTTP2_HEADERS && frame.hd.type != NGHTTP2_DATA) return 0;
  if (nghttp2_session_get_stream_remote_close(session_, frame.hd.stream_id) == 0)
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, frame.hd.stream_id, NGHTTP2_NO_ERROR);
  return 0;
}

int Http2Session::stream_closed(std::int32_t id, std::uint32_t) {
  auto* s = stream_of(session_, id);
  if (s == nullptr) return 0;
  nghttp2_session_set_stream_user_data(session_, id, nullptr);
  s->on_close();
  if (!s->running()) forget(*s);
  return 0;
}

void Http2Session::count_reset(bool sent, std::uint32_t error_code) noexcept {
  const auto reason = std::min<std::size_t>(error_code, http2_reset_reasons - 1);
  bump(http2_counters(worker_.index).resets[sent ? 1 : 0][reason]);
}

// Rapid Reset (CVE-2023-44487): streams opened and reset before their answer cost the origin
// work and the client nothing; past the budget the connection is closed.
void Http2Session::early_reset() {
  auto& counted = http2_counters(worker_.index);
  bump(counted.early_resets);
  if (++early_resets_ != max_early_resets_) return;
  bump(counted.calm_closes);
  spdlog::debug("client {}: HTTP/2: {} streams reset before their answer: GOAWAY", client_ip_, early_resets_);
  nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
  want_write();
}

// Frames that cost work and bring no request: PING, SETTINGS beyond the preface's, PRIORITY
// and DATA that is empty and does not end its stream. True for those (then counted).
bool Http2Session::is_glitch(const nghttp2_frame& frame) noexcept {
  const bool ack = (frame.hd.flags & NGHTTP2_FLAG_ACK) != 0;
  switch (frame.hd.type) {
    case NGHTTP2_PING:
      if (!ack) glitch(Http2Glitch::ping);
      return !ack;
    case NGHTTP2_SETTINGS:
      if (ack || !std::exchange(settings_seen_, true)) return false;
      glitch(Http2Glitch::settings);
      return true;
    case NGHTTP2_PRIORITY:
      glitch(Http2Glitch::priority);
      return true;
    case NGHTTP2_DATA:
      if (frame.hd.length != 0 || (frame.hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) return false;
      glitch(Http2Glitch::empty_data);
      return true;
    default:
      return false;
  }
}

// One glitch more, one a second forgiven: a client that keeps a connection alive with a PING
// every few seconds never runs out; a flood reaches http2_max_glitches at once and the
// connection is closed.
void Http2Session::glitch(Http2Glitch kind) {
  if (glitches_ >= max_glitches_) return;  // told already: what else the read held goes unread
  auto& counted = http2_counters(worker_.index);
  bump(counted.glitches[static_cast<std::size_t>(kind)]);
  const auto now = worker_.clock.now();
  const auto forgiven = std::chrono::duration_cast<std::chrono::seconds>(now - glitch_at_).count();
  if (forgiven > 0) {
    glitches_ = static_cast<std::uint32_t>(std::max<std::int64_t>(0, std::int64_t{glitches_} - forgiven));
    glitch_at_ = now;
  }
  if (++glitches_ != max_glitches_) return;
  bump(counted.calm_closes);
  bump(counted.glitch_closes);
  spdlog::debug("client {}: HTTP/2: {} frames without a request ({} last): GOAWAY", client_ip_, glitches_,
                http2_glitch_names[static_cast<std::size_t>(kind)]);
  nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
  want_write();
}

// ---- streams

// The streams whose requests came start once nghttp2 has sent what it queued (after a
// mem_send pass): a stream it reset as malformed (content-length against the DATA, a bad field
// found late) is closed by then, and never starts.
void Http2Session::start_streams() {
  for (auto it = streams_.begin(); it != streams_.end();) {
    auto& s = static_cast<Http2Stream&>(*it++);
    if (s.ready()) start_ready(s);
  }
}

void Http2Session::start_ready(Http2Stream& stream) {
  ++running_;
  stream.begin();  // running from now on: nghttp2 closing it meanwhile leaves it to serve_stream()
  net::co_spawn(worker_.io, serve_stream(stream), net::detached);
}

net::awaitable<void> Http2Session::serve_stream(Http2Stream& stream) {
  co_await stream.run();
  --running_;
  if (stream.closed()) forget(stream);
  want_write();
  if (running_ == 0) done_wake_.cancel();
}

void Http2Session::forget(Http2Stream& stream) {
  streams_.erase(streams_.iterator_to(stream));
  delete &stream;
  bump(http2_counters(worker_.index).streams_closed);
  if (streams_.empty()) arm_idle();
}

net::awaitable<void> Http2Session::wait_streams() {
  while (running_ > 0) {
    done_wake_.expires_at(net::steady_timer::time_point::max());
    co_await done_wake_.async_wait(nothrow);
  }
}

}  // namespace sluice::proxy
