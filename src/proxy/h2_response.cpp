// An HTTP/2 stream's answer: the origin's head (spliced as for an HTTP/1.1 client, with the
// route's rules) turned into a HEADERS frame without the connection-specific fields (RFC 9113
// §8.2.2), its body read by the body relay's steps and handed to nghttp2 as DATA, piece by piece,
// under the client's flow control; sluice's own answers the same way. The access log line.
#include <array>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/string.hpp>
#include <spdlog/spdlog.h>

#include "sluice/compress/accept_encoding.hpp"
#include "sluice/http/edge_rules.hpp"
#include "sluice/proxy/body_relay.hpp"
#include "sluice/proxy/compressed_relay.hpp"
#include "sluice/proxy/grpc.hpp"
#include "sluice/proxy/h2_session.hpp"
#include "sluice/proxy/h2_stream.hpp"
#include "sluice/proxy/unrouted.hpp"

namespace sluice::proxy {

namespace net = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);

ssize_t read_body_cb(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                     std::uint32_t* flags, nghttp2_data_source* source, void*) {
  return static_cast<Http2Stream*>(source->ptr)->read_body(buf, length, flags);
}

}  // namespace

// An HTTP/1.1 head (status line and fields, as sluice writes them) as HTTP/2 HEADERS: :status,
// then the fields with lowercase names, minus the connection-specific ones. False: the stream is
// gone (nothing submitted).
// An answer's head as sluice wrote it for HTTP/1.1, as nghttp2's fields: :status, then each field
// with its name lowercased, less the connection-specific ones. They point into nv_text_ and
// `head`, which nghttp2 copies when the fields are submitted; the array is the thread's.
std::span<const nghttp2_nv> Http2Stream::answer_fields(std::string_view head) {
  nv_text_.assign(head);
  thread_local std::vector<nghttp2_nv> nv;
  nv.clear();
  nv.push_back(h2_field(":status", head.substr(9, 3)));
  std::size_t at = head.find("\r\n") + 2;
  while (at < head.size()) {
    const auto end = head.find("\r\n", at);
    if (end == std::string_view::npos || end == at) break;
    const auto colon = head.find(':', at);
    if (colon == std::string_view::npos || colon > end) break;
    auto value_at = colon + 1;
    while (value_at < end && (head[value_at] == ' ' || head[value_at] == '\t')) ++value_at;
    for (auto i = at; i < colon; ++i) nv_text_[i] = ascii_lower(nv_text_[i]);
    const auto name = std::string_view(nv_text_).substr(at, colon - at);
    if (!connection_specific_field(name)) nv.push_back(h2_field(name, head.substr(value_at, end - value_at)));
    at = end + 2;
  }
  return nv;
}

bool Http2Stream::submit_head(std::string_view head, bool has_body) {
  if (closed_ || head.size() < 12) return false;
  const auto nv = answer_fields(head);
  nghttp2_data_provider provider{};
  provider.source.ptr = this;
  provider.read_callback = read_body_cb;
  if (nghttp2_submit_response(session_.native(), id_, nv.data(), nv.size(), has_body ? &provider : nullptr) != 0)
    return false;
  answered_ = true;
  status_ = static_cast<unsigned>(std::atoi(nv_text_.c_str() + 9));
  session_.want_write();
  return true;
}

// nghttp2 asks for the answer's next DATA: what the current piece still holds, the end of the
// body after the last piece, or a wait (deferred until offer() resumes it).
ssize_t Http2Stream::read_body(std::uint8_t* buf, std::size_t length, std::uint32_t* flags) {
  const auto n = std::min(length, out_.size());
  if (n != 0) std::memcpy(buf, out_.data(), n);  // an empty piece may have no data() at all
  out_.remove_prefix(n);
  bytes_out_ += n;
  if (out_.empty() && out_last_) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    eof_sent_ = true;
    if (trailers_out_ != nullptr) {  // the stream ends with the trailers' HEADERS instead
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      submit_trailers();
    }
  }
  if (out_.empty()) wake_.cancel();
  if (n == 0 && !eof_sent_) return NGHTTP2_ERR_DEFERRED;
  return static_cast<ssize_t>(n);
}

// A piece of the answer's body to nghttp2; returns once all of it was taken (false: the stream
// closed or its client stopped reading for idle_timeout).
net::awaitable<bool> Http2Stream::offer(std::string_view bytes, bool last) {
  out_ = bytes;
  out_last_ = last;
  nghttp2_session_resume_data(session_.native(), id_);
  session_.want_write();
  co_return co_await wait_taken();
}

// True once nghttp2 took all of the piece (and the end of the body with the last one). The
// stream may be closed by then: nghttp2 closes it as it sends the last DATA, before this resumes,
// and that answer is whole (its origin connection reusable).
net::awaitable<bool> Http2Stream::wait_taken() {
  arm(snapshot_->config->server.idle_timeout);
  const auto taken = [this] { return out_.empty() && (!out_last_ || eof_sent_); };
  while (!closed_ && !timed_out_ && !taken()) {
    wake_.expires_at(net::steady_timer::time_point::max());
    co_await wake_.async_wait(nothrow);
  }
  co_return taken();
}

net::awaitable<bool> Http2Stream::wait_for(Clock::duration d) {
  wake_.expires_after(d);
  co_await wake_.async_wait(nothrow);
  co_return !closed_;
}

// The origin's final answer: its head spliced as for an HTTP/1.1 client (X-Request-Id, Date, the
// route's response rules), then framed; its body relayed. True: the origin connection may be
// reused.
net::awaitable<bool> Http2Stream::respond() {
  const auto& res = up_.response();
  const bool is_head = request_->verb() == boost::beast::http::verb::head;
  const auto plan = http::plan_response(res, is_head, 11, true);
  status_ = res.status();
  origin_idle_ = http::keep_alive_timeout(res.value(http::KnownField::keep_alive));
  splice_answer(res, plan, plan_coding(res));
  const bool reusable = res.keep_alive(is_head) && !up_.request_unsent();
  if (idem_) idem_->capture_head(res, record_.attempts);
  if (!submit_head(head_out_, plan.body_expected)) co_return false;
  if (!plan.body_expected) {
    if (idem_) idem_->capture_end();
    co_return reusable;
  }
  const bool whole = co_await relay_body(plan);
  co_return whole && reusable && up_.in().size() == 0;
}

void Http2Stream::splice_answer(const http::ResponseHead& res, const http::ResponsePlan& plan,
                                const compress::Plan& coding) {
  head_out_.clear();
  http::ResponseSplice edits{request_id_, plan, 11, 1};
  edits.date = worker_.date.now();
  compress::edit_head(coding, edits);
  char version[24];
  http::Variables vars;
  if (!route_->response_rules.empty()) {
    vars = rule_variables(version);
    edits.rules = &route_->response_rules;
    edits.vars = &vars;
  }
  http::splice_response_head(head_out_, res, edits);
}

compress::Plan Http2Stream::plan_coding(const http::ResponseHead& res) {
  const auto* policy = route_->compress;
  if (policy == nullptr) return {};
  const compress::RequestSide side{compress::negotiate(compress::accept_encoding_of(*request_), policy->preference),
                                   request_->verb() == boost::beast::http::verb::head, 11};
  return compress::take_encoder(compress::plan(*policy, res, side), *policy, worker_.encoders,
                                res.content_length().value_or(0), encoder_);
}

net::awaitable<bool> Http2Stream::offer_body(std::string_view piece, bool last) {
  if (!encoder_) co_return co_await offer(piece, last);
  // The relay block's last 16 KiB take the encoder's output (relay_body() reads into the rest).
  if (relay_ == nullptr) relay_ = worker_.relay_blocks.acquire();
  const std::span<char> out(relay_ + relay_block_size - coded_block_size, coded_block_size);
  for (;;) {
    const auto step = code_step(encoder_, piece, out, last);
    if (!step) {
      spdlog::warn("upstream {}: compressing a response failed: {}", upstream_->name(), step.error().message());
      coding_failed_ = true;
      error_ = "compression failed";
      if (!closed_) {
        nghttp2_submit_rst_stream(session_.native(), NGHTTP2_FLAG_NONE, id_, NGHTTP2_INTERNAL_ERROR);
        session_.want_write();
      }
      co_return false;
    }
    if ((step->produced > 0 || (step->done && last)) && !co_await offer({out.data(), step->produced}, step->done && last))
      co_return false;
    if (step->done) co_return true;
  }
}

// The origin's body, piece by piece (body_relay.hpp's steps: Content-Length, chunked decoded and
// validated, or up to the close), each handed to nghttp2 and taken before the next is read. A
// body that breaks off resets the stream (INTERNAL_ERROR): the client must not take it as whole.
net::awaitable<bool> Http2Stream::relay_body(const http::ResponsePlan& plan) {
  // The relay block is taken only for a read: a body that came with the head is handed on from
  // the read buffer (most answers, with hundreds of streams open).
  const auto relay = [this] {
    if (relay_ == nullptr) relay_ = worker_.relay_blocks.acquire();
    return std::span<char>(relay_, relay_block_size - (encoder_ ? coded_block_size : 0));
  };
  const auto response_timeout = upstream_->config().response_timeout;
  auto arm_read = [this, response_timeout] { arm(response_timeout); };
  std::uint64_t left = up_.response().content_length().value_or(0);
  if (plan.chunked_in)
    up_.chunked() = http::ChunkedDecoder({.max_line = 4096, .max_trailer = snapshot_->config->server.max_header_bytes});
  else if (!plan.until_close && left == 0)
    co_return co_await offer_body({}, true);
  for (;;) {
    const auto piece = plan.chunked_in      ? co_await read_chunked_piece(up_.stream(), up_.in(), up_.chunked(), relay(), arm_read)
                       : up_.in().size() > 0 ? BodyPiece{{}, pending_piece(up_.in(), left, plan.until_close), true}
                                             : co_await read_piece(up_.stream(), up_.in(), relay(), left, plan.until_close, arm_read);
    const bool eof = piece.ec == net::error::eof || (piece.ec == net::ssl::error::stream_truncated && plan.until_close);
    if (piece.malformed || (piece.ec && !(eof && plan.until_close)) || closed_) {
      body_failure_ = piece.malformed ? FailureKind::bad_response
                      : timed_out_     ? FailureKind::response_timeout
                                       : FailureKind::reset_after_send;
      cut(NGHTTP2_INTERNAL_ERROR);
      co_return false;
    }
    if (!plan.chunked_in && !plan.until_close) left -= piece.bytes.size();
    const bool last = eof || (plan.chunked_in ? up_.chunked().done() : (!plan.until_close && left == 0));
    if (!co_await offer_body(piece.bytes, last)) {
      if (!coding_failed_) client_gone();
      co_return false;
    }
    if (idem_) idem_->capture_body(piece.bytes);
    if (piece.buffered) up_.in().consume(piece.bytes.size());
    if (last) {
      if (idem_) idem_->capture_end();
      co_return true;
    }
  }
}

// The client reset the stream, or did not take its answer for idle_timeout (then the stream is
// reset: its window, or the connection's, stayed shut).
void Http2Stream::client_gone() {
  error_ = closed_ ? "client closed" : "client write timeout";
  if (closed_) return;
  nghttp2_submit_rst_stream(session_.native(), NGHTTP2_FLAG_NONE, id_, NGHTTP2_CANCEL);
  session_.want_write();
}

// The answer broke off: the stream is reset with `error_code`.
void Http2Stream::cut(std::uint32_t error_code) {
  error_ = "upstream body cut";
  if (closed_) return;
  nghttp2_submit_rst_stream(session_.native(), NGHTTP2_FLAG_NONE, id_, error_code);
  session_.want_write();
}

// sluice's own answer (format_error(), error_response.hpp), framed like an origin's.
net::awaitable<void> Http2Stream::send_error(const ProxyError& error) {
  status_ = error.status;
  error_ = error.reason;
  if (answered_) co_return;
  if (request_id_.empty()) request_id_ = worker_.ids.next(generated_id_);
  const auto style = error_style_of(*snapshot_->config, route_ != nullptr ? route_->error_pages : nullptr,
                                    error.status, worker_.date.now());
  char buf[1024];
  const auto n = format_error(buf, error, request_id_, true, style);
  if (grpc_) {
    submit_grpc_answer({buf, n}, error.status);
    co_return;
  }
  co_await send_http1_answer({buf, n}, style.page);
}

// A gRPC client reads the outcome from grpc-status (RFC-less, gRPC's PROTOCOL-HTTP2.md): a
// trailers-only answer, HTTP 200 with the status for `status`, grpc-message saying why (the
// Sluice-Error text when error_detail shows it, else the status line's words), X-Request-Id,
// Retry-After.
bool Http2Stream::submit_grpc_answer(std::string_view answer, unsigned status) {
  const auto field = [answer](std::string_view name) {
    const auto at = answer.find(name);
    if (at == std::string_view::npos) return std::string_view();
    const auto from = at + name.size();
    return answer.substr(from, answer.find("\r\n", from) - from);
  };
  auto why = field("\r\nSluice-Error: ");
  if (why.empty()) why = field("HTTP/1.1 ");
  char message[256];
  nv_text_.assign(grpc_message(why, message));
  const std::array nv{h2_field(":status", "200"), h2_field("content-type", "application/grpc"),
                      h2_field("grpc-status", grpc_status_for(status)), h2_field("grpc-message", nv_text_),
                      h2_field("x-request-id", request_id_), h2_field("retry-after", field("\r\nRetry-After: "))};
  const std::size_t count = nv.back().valuelen != 0 ? nv.size() : nv.size() - 1;
  if (closed_ || nghttp2_submit_response(session_.native(), id_, nv.data(), count, nullptr) != 0) return false;
  grpc_status_.assign(grpc_status_for(status));
  answered_ = true;
  session_.want_write();
  return true;
}

// `return`: the route's own answer, no upstream involved.
net::awaitable<void> Http2Stream::send_fixed_answer() {
  char version[24];
  const auto vars = rule_variables(version);
  head_out_.clear();
  status_ = route_->answer->status;
  http::append_fixed_answer(head_out_, *route_->answer, vars, &route_->response_rules, true,
                            request_->verb() == boost::beast::http::verb::head, 11, worker_.date.now());
  co_await send_http1_answer(head_out_, {});
}

// An answer sluice wrote as HTTP/1.1 (head, body behind it, and `page` after that): HEADERS and
// DATA.
net::awaitable<void> Http2Stream::send_http1_answer(std::string_view answer, std::string_view page) {
  const auto end = answer.find("\r\n\r\n");
  if (end == std::string_view::npos) co_return;
  error_body_.assign(answer.substr(end + 4));
  error_body_.append(page);
  const bool has_body = !error_body_.empty() && method_ != "HEAD";
  if (!submit_head(answer.substr(0, end + 2), has_body) || !has_body) co_return;
  co_await offer(error_body_, true);
}

void Http2Stream::log_exchange() {
  auto& c = record_.server != nullptr ? record_.server->counters(worker_.index)
            : upstream_ != nullptr    ? upstream_->unserved(worker_.index)
                                      : unrouted_counters(worker_.index);
  const auto took = std::chrono::duration_cast<std::chrono::microseconds>(worker_.clock.now() - start_);
  const bool own = !error_.empty() || record_.server == nullptr;
  if (status_ >= 100 && status_ < 600)
    c.count_exchange(own ? EndpointCounters::own_answer_slot(status_) : status_ / 100, took);
  static_assert(std::size(grpc_code_names) == EndpointCounters::grpc_code_slots);
  if (!grpc_status_.empty()) EndpointCounters::bump(c.grpc_codes[own ? 1 : 0][grpc_code_slot(grpc_status_)]);
  if (!worker_.access_log.enabled()) return;
  AttemptRecord::ServersText servers;
  worker_.access_log.write(access_record(servers));
}

AccessRecord Http2Stream::access_record(AttemptRecord::ServersText& servers) const {
  AccessRecord r;
  r.client = client_text_.empty() ? std::string_view(session_.client_ip()) : std::string_view(client_text_);
  r.method = method_.empty() ? std::string_view("-") : std::string_view(method_);
  r.target = path_.empty() ? std::string_view("-") : std::string_view(path_);
  r.protocol = "HTTP/2.0";
  r.host = authority_;
  if (request_ != nullptr) r.user_agent = request_->value("User-Agent");
  r.status = status_;
  r.upstream = upstream_ != nullptr ? std::string_view(upstream_->name()) : std::string_view();
  r.server = record_.servers_tried(servers);
  r.attempts = record_.attempts;
  r.bytes_in = received_;
  r.bytes_out = bytes_out_;
  r.duration = std::chrono::duration_cast<std::chrono::microseconds>(worker_.clock.now() - start_);
  r.request_id = request_id_;
  r.route = route_ != nullptr ? std::string_view(route_->label) : std::string_view();
  if (record_.upstream_ready != Clock::time_point{})
    r.upstream_connect = std::chrono::duration_cast<std::chrono::microseconds>(record_.upstream_ready - record_.attempt_start);
  if (record_.first_byte != Clock::time_point{})
    r.upstream_first_byte = std::chrono::duration_cast<std::chrono::microseconds>(record_.first_byte - record_.attempt_start);
  r.error = error_;
  r.grpc_status = grpc_status_;
  if (idem_) r.idempotency = idempotency::to_string(idem_->outcome());
  if (const auto* cert = session_.client_cert()) {
    r.client_cert_verify = cert->verify;
    r.client_cert_subject = cert->subject;
  }
  return r;
}

}  // namespace sluice::proxy
