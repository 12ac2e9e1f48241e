#include "websocket.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string_view>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <boost/json/serialize.hpp>

namespace sluice::client {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace json = boost::json;
using tcp = net::ip::tcp;
using boost::system::error_code;

constexpr auto nothrow = net::as_tuple(net::use_awaitable);
constexpr std::string_view alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";

// Message i: mostly small and of varied size, every 500th one 100 KiB (larger than any relay
// buffer on the way); even ones text, odd ones binary; content depends on i and the position,
// so a lost, repeated or reordered message or byte shows.
std::size_t message_size(std::uint64_t i) { return i % 500 == 499 ? 100 * 1024 : (i * 7919) % 3000 + 1; }
bool message_is_text(std::uint64_t i) { return i % 2 == 0; }
void make_message(std::uint64_t i, std::string& out) {
  out.resize(message_size(i));
  for (std::size_t j = 0; j < out.size(); ++j) out[j] = alphabet[(i + j) % alphabet.size()];
}

using Stream = websocket::stream<tcp::socket>;

void set_handshake_headers(Stream& ws, const WebSocketTarget& t) {
  ws.set_option(websocket::stream_base::decorator([headers = t.headers](websocket::request_type& req) {
    for (const auto& h : headers) {
      const auto colon = h.find(':');
      auto value = std::string_view(h).substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      req.insert(std::string_view(h).substr(0, colon), value);
    }
  }));
}

json::object handshake_summary(const websocket::response_type& res, error_code ec) {
  json::object out;
  out["handshake_status"] = res.result_int();
  if (const auto it = res.find("X-Origin"); it != res.end()) out["origin"] = it->value();
  if (const auto it = res.find("Sluice-Error"); it != res.end()) out["sluice_error"] = it->value();
  if (ec) out["handshake_error"] = ec.message();
  return out;
}

std::string_view text_of(const beast::flat_buffer& b) {
  return {static_cast<const char*>(b.data().data()), b.size()};
}

}  // namespace

json::object run_websocket(const WebSocketTarget& t, std::uint64_t messages, net::io_context& io,
                           const tcp::resolver::results_type& where,
                           std::atomic<std::uint64_t>& progress, bool& ok) {
  Stream ws(io);
  net::connect(ws.next_layer(), where);
  ws.next_layer().set_option(tcp::no_delay(true));
  set_handshake_headers(ws, t);
  ws.read_message_max(1 << 20);
  websocket::response_type res;
  error_code ec;
  ws.handshake(res, t.host + ":" + t.port, t.target, ec);
  json::object out = handshake_summary(res, ec);
  out["mode"] = "websocket";
  out["messages"] = messages;
  ok = false;
  if (ec) return out;

  std::uint64_t sent = 0, echoed = 0, mismatches = 0, bytes_sent = 0, bytes_echoed = 0;
  std::optional<std::uint64_t> first_mismatch;
  std::string write_error, read_error;
  auto writer = [&]() -> net::awaitable<void> {
    std::string message;
    for (std::uint64_t i = 0; i < messages; ++i) {
      make_message(i, message);
      ws.text(message_is_text(i));
      auto [wec, n] = co_await ws.async_write(net::buffer(message), nothrow);
      if (wec) {
        write_error = wec.message();
        co_return;
      }
      ++sent;
      bytes_sent += n;
    }
  };
  auto reader = [&]() -> net::awaitable<void> {
    beast::flat_buffer buffer;
    std::string expected;
    for (std::uint64_t i = 0; i < messages; ++i) {
      auto [rec, n] = co_await ws.async_read(buffer, nothrow);
      if (rec) {
        read_error = rec.message();
        co_return;
      }
      make_message(i, expected);
      if (text_of(buffer) != expected || ws.got_text() != message_is_text(i)) {
        ++mismatches;
        if (!first_mismatch) first_mismatch = i;
      }
      ++echoed;
      bytes_echoed += n;
      progress.store(echoed, std::memory_order_relaxed);
      buffer.consume(buffer.size());
    }
  };
  {
    using namespace net::experimental::awaitable_operators;
    net::co_spawn(io, [&]() -> net::awaitable<void> { co_await (writer() && reader()); }, net::detached);
    io.restart();
    io.run();
  }
  out["sent"] = sent;
  out["echoed"] = echoed;
  out["mismatches"] = mismatches;
  out["bytes_sent"] = bytes_sent;
  out["bytes_echoed"] = bytes_echoed;
  if (first_mismatch) out["first_mismatch"] = *first_mismatch;
  if (!write_error.empty()) out["write_error"] = write_error;
  if (!read_error.empty()) out["read_error"] = read_error;
  ok = sent == messages && echoed == messages && mismatches == 0;
  if (ok) {
    error_code close_ec;
    ws.close(websocket::close_code::normal, close_ec);
    out["closed"] = close_ec ? close_ec.message() : std::string("normal");
    ok = !close_ec;
  }
  return out;
}

json::object run_websocket_script(const WebSocketTarget& t, net::io_context& io,
                                  const tcp::resolver::results_type& where, bool& ok) {
  Stream ws(io);
  net::connect(ws.next_layer(), where);
  ws.next_layer().set_option(tcp::no_delay(true));
  set_handshake_headers(ws, t);
  websocket::response_type res;
  error_code ec;
  ws.handshake(res, t.host + ":" + t.port, t.target, ec);
  json::object last = handshake_summary(res, ec);
  last["mode"] = "websocket-script";
  ok = !ec;
  const auto say = [](const json::object& o) {
    std::cout << json::serialize(o) << std::endl;  // one line per answer, flushed
  };
  say(last);
  if (ec) return last;

  std::string line, message;
  beast::flat_buffer buffer;
  std::uint64_t next = 0;  // message index, across echo commands
  bool open = true;
  while (open && std::getline(std::cin, line)) {
    json::object out;
    const auto started = std::chrono::steady_clock::now();
    if (line.starts_with("echo ")) {
      const auto n = std::stoull(line.substr(5));
      std::uint64_t done = 0;
      error_code xec;
      for (; done < n && !xec; ++done, ++next) {
        make_message(next, message);
        ws.text(message_is_text(next));
        ws.write(net::buffer(message), xec);
        if (!xec) ws.read(buffer, xec);
        if (!xec && text_of(buffer) != message) {
          out["mismatch"] = next;
          break;
        }
        buffer.consume(buffer.size());
      }
      out["echoed"] = xec ? done - 1 : done;
      if (xec) out["error"] = xec.message();
      out["ok"] = !xec && done == n && !out.contains("mismatch");
      open = !xec;
    } else if (line == "wait-close") {
      error_code rec;
      while (!rec) {
        ws.read(buffer, rec);
        buffer.consume(buffer.size());
      }
      out["closed"] = rec.message();
      open = false;
    } else if (line == "close") {
      error_code cec;
      ws.close(websocket::close_code::normal, cec);
      out["closed"] = cec ? cec.message() : std::string("normal");
      open = false;
    } else {
      out["error"] = "unknown command '" + line + "'";
    }
    out["after_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - started)
                          .count();
    say(out);
    last = out;
  }
  return last;
}

}  // namespace sluice::client
