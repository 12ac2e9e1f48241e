#include "sluice/health/grpc_probe.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <nghttp2/nghttp2.h>

#include "sluice/core/grpc_codes.hpp"
#include "sluice/http/h2_frames.hpp"

namespace sluice::health {

namespace net = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);
constexpr std::size_t kept_body = 4096;     // a health answer is a few bytes
constexpr std::size_t kept_message = 200;   // of grpc-message, in the reason
constexpr std::string_view serving_names[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};

// The call's state, as nghttp2's callbacks fill it.
struct Call {
  GrpcAnswer answer;
  std::string_view request;  // the body still to send
  std::int32_t stream = -1;
  bool closed = false;
};

Call& call_of(void* user_data) { return *static_cast<Call*>(user_data); }

int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
              const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user_data) {
  auto& c = call_of(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->hd.stream_id != c.stream) return 0;
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  if (n == ":status") {
    unsigned status = 0;
    for (const char ch : v) status = (ch >= '0' && ch <= '9' && status < 1000) ? status * 10 + unsigned(ch - '0') : 1000;
    c.answer.status = status;
  } else if (n == "grpc-status") {
    c.answer.grpc_status.assign(v.substr(0, 8));
  } else if (n == "grpc-message") {
    c.answer.grpc_message.assign(v.substr(0, kept_message));
  }
  return 0;
}

int on_data(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data, std::size_t len,
            void* user_data) {
  auto& c = call_of(user_data);
  if (id != c.stream) return 0;
  const auto room = kept_body - std::min(kept_body, c.answer.body.size());
  c.answer.body.append(reinterpret_cast<const char*>(data), std::min(len, room));
  return 0;
}

int on_frame(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  auto& c = call_of(user_data);
  const bool ends = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (frame->hd.stream_id == c.stream && ends && (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA))
    c.answer.complete = true;
  return 0;
}

int on_close(nghttp2_session*, std::int32_t id, std::uint32_t, void* user_data) {
  auto& c = call_of(user_data);
  if (id == c.stream) c.closed = true;
  return 0;
}

ssize_t read_request(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length, std::uint32_t* flags,
                     nghttp2_data_source*, void* user_data) {
  auto& c = call_of(user_data);
  const auto n = std::min(length, c.request.size());
  std::memcpy(buf, c.request.data(), n);
  c.request.remove_prefix(n);
  if (c.request.empty()) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(n);
}

struct SessionDelete {
  void operator()(nghttp2_session* s) const noexcept { nghttp2_session_del(s); }
};
using Session = std::unique_ptr<nghttp2_session, SessionDelete>;

Session client_session(Call& call) {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
  nghttp2_session* session = nullptr;
  nghttp2_session_client_new(&session, cb, &call);
  nghttp2_session_callbacks_del(cb);
  return Session(session);
}

// A protobuf varint at `at` in `m`; false when cut or longer than 64 bits.
bool varint(std::string_view m, std::size_t& at, std::uint64_t& out) {
  out = 0;
  for (unsigned shift = 0; shift < 64 && at < m.size(); shift += 7) {
    const auto byte = static_cast<std::uint8_t>(m[at++]);
    out |= std::uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// HealthCheckResponse's field 1 (status, an enum); fields it does not know are skipped. Absent:
// UNKNOWN (0), proto3's default. False: not a protobuf message.
bool serving_status(std::string_view m, std::uint64_t& status) {
  status = 0;
  for (std::size_t at = 0; at < m.size();) {
    std::uint64_t key = 0, value = 0;
    if (!varint(m, at, key)) return false;
    switch (key & 7) {
      case 0:
        if (!varint(m, at, value)) return false;
        if (key >> 3 == 1) status = value;
        break;
      case 1: at += 8; break;
      case 2:
        if (!varint(m, at, value) || value > m.size() - at) return false;
        at += value;
        break;
      case 5: at += 4; break;
      default: return false;
    }
    if (at > m.size()) return false;
  }
  return true;
}

}  // namespace

std::string grpc_health_request(std::string_view service) {
  // HealthCheckRequest { string service = 1; }: absent when empty, as protobuf writes it.
  std::string message;
  if (!service.empty()) {
    message.push_back('\x0a');
    for (auto n = service.size(); ; n >>= 7) {
      message.push_back(static_cast<char>((n & 0x7f) | (n > 0x7f ? 0x80 : 0)));
      if (n <= 0x7f) break;
    }
    message.append(service);
  }
  const auto n = static_cast<std::uint32_t>(message.size());
  std::string frame{'\0', static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                    static_cast<char>(n)};
  return frame + message;
}

ProbeResult judge_grpc_health(const GrpcAnswer& a) {
  const auto fail = [](std::string why) { return ProbeResult{false, std::move(why), {}}; };
  if (a.status == 0) return fail(a.complete ? "bad response" : "stream reset before an answer");
  if (a.status != 200) return fail("status " + std::to_string(a.status) + " not 200 (gRPC)");
  if (a.grpc_status.empty()) return fail(a.complete ? "no grpc-status in the answer" : "stream reset before its end");
  if (a.grpc_status != "0") {
    std::string why = "grpc-status " + a.grpc_status + " (" + std::string(grpc_code_names[grpc_code_slot(a.grpc_status)]) + ")";
    if (!a.grpc_message.empty()) why += ": " + a.grpc_message;
    return fail(std::move(why));
  }
  const std::string_view body = a.body;
  std::uint64_t status = 0;
  if (body.size() < 5 || body[0] != '\0') return fail("bad health response");
  const auto length = (std::uint32_t(std::uint8_t(body[1])) << 24) | (std::uint32_t(std::uint8_t(body[2])) << 16) |
                      (std::uint32_t(std::uint8_t(body[3])) << 8) | std::uint32_t(std::uint8_t(body[4]));
  if (length > body.size() - 5 || !serving_status(body.substr(5, length), status)) return fail("bad health response");
  if (status == 1) return ProbeResult{true, {}, {}};
  return fail("health status " + (status < std::size(serving_names) ? std::string(serving_names[status])
                                                                    : std::to_string(status)));
}

net::awaitable<GrpcAnswer> grpc_health_call(tls::Stream& socket, std::string_view authority, std::string_view service,
                                            bool tls, error_code& error) {
  const auto request = grpc_health_request(service);
  Call call;
  call.request = request;
  auto session = client_session(call);
  nghttp2_submit_settings(session.get(), NGHTTP2_FLAG_NONE, nullptr, 0);
  using http::h2_field;
  const std::array fields{h2_field(":method", "POST"),           h2_field(":scheme", tls ? "https" : "http"),
                          h2_field(":path", grpc_health_path),    h2_field(":authority", authority),
                          h2_field("content-type", "application/grpc"), h2_field("te", "trailers"),
                          h2_field("user-agent", "sluice-health")};
  nghttp2_data_provider body{};
  body.read_callback = read_request;
  call.stream = nghttp2_submit_request(session.get(), nullptr, fields.data(), fields.size(), &body, nullptr);
  std::string out;
  std::array<std::uint8_t, 16 * 1024> in;
  while (!call.closed && call.stream > 0) {
    out.clear();
    http::gather_h2_frames(session.get(), out, SIZE_MAX);
    if (!out.empty()) {
      const auto [ec, written] = co_await net::async_write(socket, net::buffer(out), nothrow);
      if (ec) {
        error = ec;
        break;
      }
    }
    if (call.closed) break;
    const auto [ec, n] = co_await socket.async_read_some(net::buffer(in), nothrow);
    if (ec) {
      error = ec;
      break;
    }
    if (nghttp2_session_mem_recv(session.get(), in.data(), n) < 0) {
      error = boost::system::errc::make_error_code(boost::system::errc::protocol_error);
      break;
    }
  }
  co_return std::move(call.answer);
}

}  // namespace sluice::health
