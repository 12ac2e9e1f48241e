#include "sluice/runtime/fleet_redis.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace sluice::fleet {

namespace net = boost::asio;
using boost::system::error_code;
using boost::system::result;
using tcp = net::ip::tcp;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);

}  // namespace

RedisLink::RedisLink(const net::any_io_executor& ex, const config::FleetSection& where)
    : where_(where), socket_(ex), timer_(ex) {}

void RedisLink::close() {
  error_code ignored;
  socket_.close(ignored);
  reader_.reset();
}

template <class Op>
net::awaitable<result<Reply>> RedisLink::bounded(Op op, Clock::time_point deadline) {
  using namespace net::experimental::awaitable_operators;
  timer_.expires_at(std::chrono::time_point_cast<std::chrono::steady_clock::duration>(deadline));
  auto done = co_await (op() || timer_.async_wait(nothrow));
  if (done.index() == 1) {
    close();
    co_return error_code(net::error::timed_out);
  }
  auto out = std::get<0>(std::move(done));
  if (!out) close();
  co_return out;
}

net::awaitable<error_code> RedisLink::connect_socket(Clock::time_point deadline) {
  close();
  reader_ = std::make_unique<idempotency::ReplyReader>();
  const auto connected = co_await bounded(
      [this]() -> net::awaitable<result<Reply>> {
        if (!where_.unix_path.empty()) {
          auto [ec] = co_await socket_.async_connect(net::local::stream_protocol::endpoint(where_.unix_path), nothrow);
          co_return ec ? result<Reply>(ec) : Reply{};
        }
        tcp::resolver resolver(socket_.get_executor());
        auto [rec, found] = co_await resolver.async_resolve(where_.host, std::to_string(where_.port), nothrow);
        if (rec || found.empty()) co_return rec ? rec : error_code(net::error::host_not_found);
        auto [ec] = co_await socket_.async_connect(found.begin()->endpoint(), nothrow);
        co_return ec ? result<Reply>(ec) : Reply{};
      },
      deadline);
  co_return connected ? error_code{} : connected.error();
}

net::awaitable<error_code> RedisLink::connect(Clock::time_point deadline) {
  if (const auto ec = co_await connect_socket(deadline)) co_return ec;
  if (where_.unix_path.empty()) {
    error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
  }
  if (where_.db == 0) co_return error_code{};
  const std::string db = std::to_string(where_.db);
  const std::array<std::string_view, 2> select{"SELECT", db};
  const auto reply = co_await command(select, deadline);
  co_return reply ? error_code{} : reply.error();
}

net::awaitable<result<Reply>> RedisLink::read_reply() {
  for (;;) {
    bool bad = false;
    if (auto reply = reader_->next(bad)) co_return std::move(*reply);
    if (bad) co_return error_code(net::error::invalid_argument);
    auto [ec, n] = co_await socket_.async_read_some(net::buffer(buffer_), nothrow);
    if (ec) co_return ec;
    if (!reader_->feed(std::string_view(buffer_.data(), n))) co_return error_code(net::error::invalid_argument);
  }
}

net::awaitable<result<Reply>> RedisLink::roundtrip(const std::string& bytes) {
  auto [ec, n] = co_await net::async_write(socket_, net::buffer(bytes), nothrow);
  if (ec) co_return ec;
  co_return co_await read_reply();
}

net::awaitable<result<Reply>> RedisLink::command(std::span<const std::string_view> args,
                                                 Clock::time_point deadline) {
  if (!socket_.is_open()) co_return error_code(net::error::not_connected);
  // The bytes stay in this frame until the reply (or the deadline) is in.
  const std::string bytes = idempotency::format_command(args);
  auto reply = co_await bounded([this, &bytes] { return roundtrip(bytes); }, deadline);
  // An error reply leaves the connection usable; it is still a failed command.
  if (reply && reply->type == Reply::Type::error) co_return error_code(net::error::invalid_argument);
  co_return reply;
}

net::awaitable<result<Reply>> RedisLink::next_reply(Clock::time_point deadline) {
  if (!socket_.is_open()) co_return error_code(net::error::not_connected);
  co_return co_await bounded([this] { return read_reply(); }, deadline);
}

}  // namespace sluice::fleet
