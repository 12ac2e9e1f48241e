// One request's tries on the servers of an h2c or h2 upstream (h2_exchange.hpp).
#include "sluice/proxy/h2_exchange.hpp"

#include <algorithm>
#include <string>

#include "sluice/core/grpc_codes.hpp"
#include "sluice/upstream/upstream.hpp"

namespace sluice::proxy {

namespace net = boost::asio;

// One of the worker's connections to `ep` with room (perhaps one being made, then waited for),
// else a new one. While the call waits it holds a place on the connection.
net::awaitable<Failure> H2Exchange::connect(const Upstream& upstream, Endpoint& ep, Clock::time_point try_until,
                                            std::uint32_t window) {
  const auto& config = upstream.config();
  link_.deadline = std::min(try_until, worker_.clock.now() + Clock::duration(config.connect_timeout));
  timed_out_ = false;
  auto conn = worker_.h2.find(ep);
  if (conn == nullptr) {
    const auto& all = upstream.shared_endpoints();
    const auto shared = std::ranges::find(all, &ep, &std::shared_ptr<Endpoint>::get);
    conn = std::make_shared<H2Connection>(worker_.io.get_executor(), *shared,
                                          Clock::duration(config.keepalive_timeout),
                                          Clock::duration(config.connect_timeout), window);
    worker_.h2.add(ep, conn);
    conn->reserve();
    connecting_ = &conn->stream();
    conn->connected(co_await connect_h2(upstream, ep, conn->stream()));
    connecting_ = nullptr;
  } else {
    conn->reserve();
  }
  waiting_ = conn.get();
  while (conn->connecting() && !timed_out_ && !gone_) co_await conn->wait_ready();
  waiting_ = nullptr;
  conn->release();
  if (gone_) co_return Failure::of(FailureKind::client_failed);
  if (conn->connecting() || (timed_out_ && conn->failure().failed())) co_return Failure::of(FailureKind::connect_timeout);
  if (conn->failure().failed()) co_return conn->failure();
  conn_ = std::move(conn);
  co_return Failure{};
}

bool H2Exchange::request_fields(std::string_view head, bool tls, bool te_trailers) {
  return h2_request_fields(head, tls ? "https" : "http", te_trailers, text_, fields_);
}

bool H2Exchange::open(bool has_body, const std::vector<H2Field>* trailers, std::size_t max_head) {
  call_ = std::make_shared<H2Call>(worker_.io.get_executor());
  call_->trailers_after(trailers);
  call_->limit_head(max_head);
  return call_->open(std::move(conn_), fields_, has_body);
}

net::awaitable<Failure> H2Exchange::head(Clock::time_point try_until, Clock::time_point& first_byte) {
  link_.deadline = try_until;
  timed_out_ = false;
  while (!call_->head_done() && !call_->closed() && !timed_out_ && !gone_) co_await call_->wait();
  if (call_->head_done()) first_byte = worker_.clock.now();
  co_return outcome();
}

// What the wait for the answer's head came to.
Failure H2Exchange::outcome() const {
  if (gone_) return Failure::of(FailureKind::client_failed);
  Failure f;
  f.request_bytes_sent = !call_->never_processed();
  if (call_->head_done()) {
    f.status = call_->status();
    f.response_bytes_received = true;
    if (call_->ended() && call_->pending().empty() && call_->trailers().empty())
      for (const auto& field : call_->fields())
        if (field.name == "grpc-status") {
          const auto code = grpc_code_slot(field.value);
          if (code < grpc_code_count) f.grpc_status = static_cast<std::uint8_t>(code);
        }
    return f;
  }
  f.kind = timed_out_                 ? FailureKind::response_timeout
           : call_->never_processed() ? FailureKind::reset_before_send
           : call_->head_too_large()  ? FailureKind::bad_response
                                      : FailureKind::reset_after_send;
  if (call_->never_processed()) f.detail = "upstream refused the stream (never processed)";
  if (call_->head_too_large()) f.detail = "upstream response head over max_header_bytes";
  return f;
}

bool H2Exchange::answer_head(http::ResponseHead& out, bool mark_chunked) {
  const auto& call = *call_;
  // No reason phrase (HTTP/2 has none): an HTTP/1.1 client gets the registered one.
  text_.assign("HTTP/1.1 ").append(std::to_string(call.status())).append(" \r\n");
  bool sized = false;
  for (const auto& f : call.fields()) {
    if (connection_specific_field(f.name)) continue;
    sized = sized || f.name == "content-length";
    text_.append(f.name).append(": ").append(f.value).append("\r\n");
  }
  const auto status = call.status();
  if (mark_chunked && !sized && status >= 200 && status != 204 && status != 304)
    text_.append("transfer-encoding: chunked\r\n");
  text_.append("\r\n");
  const auto verdict = http::index_response_head(text_, text_.size() + 1, out);
  return verdict.result == http::HeadScan::Result::complete;
}

std::string_view H2Exchange::retry_after() const noexcept {
  if (call_ == nullptr) return {};
  for (const auto& f : call_->fields())
    if (f.name == "retry-after") return f.value;
  return {};
}

void H2Exchange::end() noexcept {
  conn_.reset();
  if (call_ == nullptr) return;
  call_->reset(NGHTTP2_CANCEL);
  call_.reset();
}

void H2Exchange::wake() noexcept {
  boost::system::error_code ignored;
  if (connecting_ != nullptr) connecting_->cancel(ignored);
  if (waiting_ != nullptr) waiting_->wake_waiters();
  if (call_ != nullptr) call_->wake();
}

}  // namespace sluice::proxy
