#include "sluice/runtime/worker.hpp"

#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "sluice/core/block_cache.hpp"
#include "sluice/proxy/downstream_session.hpp"

namespace sluice {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {
constexpr auto nothrow = net::as_tuple(net::use_awaitable);
}

Worker::Worker(unsigned index, const Clock& clock, AccessLog& access_log,
               std::shared_ptr<const Snapshot> snapshot, std::uint32_t max_connections,
               const std::atomic<bool>& shutdown)
    : guard_(net::make_work_guard(io_)),
      ctx_(index, io_, clock, access_log),
      parking_(
          ctx_,
          [this](proxy::ParkedClient c) {
            parked_.store(parking_.size(), std::memory_order_relaxed);
            net::co_spawn(io_, serve_parked(std::move(c)), net::detached);
          },
          [this] {
            parked_.store(parking_.size(), std::memory_order_relaxed);
            connection_ended();
          }),
      slot_free_(io_),
      tick_timer_(io_),
      max_connections_(max_connections) {
  ctx_.snapshot = std::move(snapshot);
  ctx_.shutdown = &shutdown;
}

Worker::~Worker() { join(); }

void Worker::add_listener(std::uint64_t id, tcp protocol, int fd, int tls_listener) {
  // The socket is registered with this worker's reactor on its own thread: the reactor does no
  // locking (BOOST_ASIO_CONCURRENCY_HINT_UNSAFE).
  mailbox_.post([this, id, protocol, fd, tls_listener] {
    auto acceptor = std::make_shared<tcp::acceptor>(io_);
    boost::system::error_code ec;
    acceptor->assign(protocol, fd, ec);
    if (ec) {
      ::close(fd);
      spdlog::error("worker {}: cannot accept on a new listener: {}", ctx_.index, ec.message());
      return;
    }
    if (ctx_.stopping) return;  // shutting down: the acceptor closes as it goes out of scope
    listeners_.push_back({id, acceptor});
    net::co_spawn(io_, accept_loop(std::move(acceptor), tls_listener), net::detached);
  });
}

void Worker::remove_listener(std::uint64_t id) {
  mailbox_.post([this, id] {
    for (auto it = listeners_.begin(); it != listeners_.end(); ++it) {
      if (it->id != id) continue;
      boost::system::error_code ignored;
      it->acceptor->close(ignored);
      listeners_.erase(it);
      slot_free_.cancel();  // an accept loop waiting for a free slot sees its acceptor closed
      return;
    }
  });
}

void Worker::set_max_connections(std::uint32_t max_connections) {
  mailbox_.post([this, max_connections] {
    max_connections_ = max_connections;
    slot_free_.cancel();
  });
}

void Worker::start() {
  net::co_spawn(io_, tick_loop(), net::detached);
  net::co_spawn(io_, mailbox_.run(), net::detached);
  thread_ = std::thread([this] {
    const FramePool::Use frames(frames_);
    try {
      io_.run();
    } catch (const std::exception& e) {
      spdlog::critical("worker {}: {}", ctx_.index, e.what());
      std::abort();
    }
  });
}

void Worker::join() {
  if (!thread_.joinable()) return;
  thread_.join();
  // stop() closed every session and stopped the loop, so the completions of their aborted
  // operations are queued but never ran: the coroutines would be destroyed suspended with the
  // io_context, after ctx_, and never give back their arena and relay blocks (LeakSanitizer
  // found the 64 KiB relay block of a request cut at shutdown_timeout). Run them here, on the
  // joining thread, now that the worker's own thread is gone: each session sees
  // operation_aborted, ends and cleans up as on any error. Tasks posted after stop() run first,
  // as they did when they were posted to the io_context itself.
  mailbox_.drain();
  io_.restart();
  io_.poll();
}

void Worker::publish(std::shared_ptr<const Snapshot> snapshot, std::function<void()> switched) {
  mailbox_.post([this, s = std::move(snapshot), switched = std::move(switched)]() mutable {
    ctx_.snapshot = std::move(s);
    if (switched) switched();
  });
}

void Worker::close_idle(Endpoint& endpoint) {
  mailbox_.post([this, e = &endpoint] { ctx_.pool.close(*e); });
}

void Worker::close_idle(std::shared_ptr<Endpoint> endpoint) {
  mailbox_.post([this, e = std::move(endpoint)] { ctx_.pool.close(*e); });
}

std::future<std::size_t> Worker::count_upstream_connections() {
  auto promise = std::make_shared<std::promise<std::size_t>>();
  auto counted = promise->get_future();
  mailbox_.post([this, promise] {
    std::size_t n = ctx_.pool.idle_count();
    for (const auto& session : ctx_.sessions) n += session.holds_upstream() ? 1 : 0;
    promise->set_value(n);
  });
  return counted;
}

void Worker::count_pooled(std::function<void(std::vector<std::uint32_t>)> done) {
  mailbox_.post([this, done = std::move(done)] { done(ctx_.pool.idle_by_endpoint()); });
}

void Worker::begin_shutdown() {
  mailbox_.post([this] {
    ctx_.stopping = true;
    for (auto& l : listeners_) {
      boost::system::error_code ignored;
      l.acceptor->close(ignored);
    }
    slot_free_.cancel();
    ctx_.pool.close_all();
    // Sessions between requests close now; busy ones after their current answer.
    for (auto it = ctx_.sessions.begin(); it != ctx_.sessions.end();) (it++)->close_if_idle();
  });
}

void Worker::stop() {
  mailbox_.post([this] {
    ctx_.stopping = true;
    for (auto it = ctx_.sessions.begin(); it != ctx_.sessions.end();) (it++)->close();
    ctx_.pool.close_all();
    tick_timer_.cancel();
    guard_.reset();
    mailbox_.close();
    io_.stop();
  });
}

net::awaitable<void> Worker::accept_loop(std::shared_ptr<tcp::acceptor> acceptor, int tls_listener) {
  // accept_now() does not suspend: after this many connections in a row the loop lets the
  // sessions already running go first (Asio's accept did that after every one).
  constexpr unsigned accept_batch = 16;
  unsigned in_a_row = 0;
  for (;;) {
    // At the limit, stop accepting: new connections wait in the kernel's backlog instead of
    // being served half.
    while (active_.load(std::memory_order_relaxed) >= max_connections_ && !ctx_.stopping &&
           acceptor->is_open()) {
      slot_free_.expires_at(net::steady_timer::time_point::max());
      co_await slot_free_.async_wait(nothrow);
    }
    if (ctx_.is_stopping() || !acceptor->is_open()) co_return;  // shutdown, or removed by a reload
    // accept4 (tls/edge_io.hpp): non-blocking and close-on-exec from the start. When the backlog
    // is empty, the wait for the next connection is queued without a try.
    tcp::endpoint peer;
    boost::system::error_code ec;
    auto socket = tls::edge::accept_now(*acceptor, peer, ec);
    if (ec == net::error::would_block) {
      in_a_row = 0;
      co_await tls::edge::readable(*acceptor, ec);
      if (!ec) continue;  // a connection is waiting
    }
    if (ec) {
      if (ctx_.is_stopping() || ec == net::error::operation_aborted || !acceptor->is_open()) co_return;
      // EMFILE/ENFILE and friends: back off instead of spinning.
      spdlog::warn("worker {}: accept failed: {}", ctx_.index, ec.message());
      net::steady_timer pause(io_, std::chrono::milliseconds(50));
      co_await pause.async_wait(nothrow);
      continue;
    }
    // Accepted in the race with shutdown: served all the same (its request is on its way; the
    // answer says Connection: close), like a connection already open.
    active_.fetch_add(1, std::memory_order_acq_rel);
    net::co_spawn(io_, serve(std::move(socket), peer.address(), tls_listener), net::detached);
    if (++in_a_row == accept_batch) {
      in_a_row = 0;
      co_await net::post(io_, net::use_awaitable);
    }
  }
}

net::awaitable<void> Worker::serve(tcp::socket socket, net::ip::address peer, int tls_listener) {
  try {
    tls::Stream client(std::move(socket));  // options from the listener (listeners.cpp)
    std::shared_ptr<tls::ServerContext> tls;
    if (tls_listener >= 0) {
      // Listeners are opened once; the certificates come from the current snapshot.
      const auto& contexts = ctx_.snapshot->tls;
      if (static_cast<std::size_t>(tls_listener) < contexts.size()) tls = contexts[static_cast<std::size_t>(tls_listener)];
      if (!tls) throw std::runtime_error("TLS listener without certificates in the current config");
      client.start_tls(tls->context());
    }
    const auto& server = ctx_.snapshot->config->server;
    const bool proxy_protocol = tls_listener < 0 ? server.proxy_protocol
                                : static_cast<std::size_t>(tls_listener) < server.tls.size()
                                    ? server.tls[static_cast<std::size_t>(tls_listener)].proxy_protocol
                                    : false;
    proxy::DownstreamSession session(ctx_, std::move(client), peer, std::move(tls), proxy_protocol);
    co_await session.run();
    session_ended(session);
  } catch (const std::exception& e) {
    session_failed(e);
  }
}

net::awaitable<void> Worker::serve_parked(proxy::ParkedClient client) {
  try {
    proxy::DownstreamSession session(ctx_, std::move(client.stream), client.client);
    session.resumed();
    co_await session.run();
    session_ended(session);
  } catch (const std::exception& e) {
    session_failed(e);
  }
}

void Worker::session_ended(proxy::DownstreamSession& session) {
  if (session.parked()) {
    parking_.park(session.take_parked());  // still open: still counted in active_
    parked_.store(parking_.size(), std::memory_order_relaxed);
  } else if (session.speaks_http2()) {
    // Still open as an HTTP/2 connection, without the HTTP/1.1 session: still counted in active_.
    net::co_spawn(io_, serve_http2(session.take_http2()), net::detached);
  } else if (session.tunneled()) {
    // Still open as a tunnel, without the session: still counted in active_.
    net::co_spawn(io_, serve_tunnel(session.take_tunnel()), net::detached);
  } else {
    connection_ended();
  }
}

net::awaitable<void> Worker::serve_tunnel(std::unique_ptr<proxy::TunnelHandoff> handoff) {
  try {
    proxy::TunnelSession tunnel(ctx_, std::move(*handoff));
    handoff.reset();
    co_await tunnel.run();
  } catch (const std::exception& e) {
    session_failed(e);
    co_return;
  }
  connection_ended();
}

net::awaitable<void> Worker::serve_http2(std::unique_ptr<proxy::Http2Handoff> handoff) {
  try {
    proxy::Http2Session session(ctx_, std::move(*handoff));
    handoff.reset();
    co_await session.run();
  } catch (const std::exception& e) {
    session_failed(e);
    co_return;
  }
  connection_ended();
}

void Worker::session_failed(const std::exception& e) {
  // Nothing on the data path should throw; if something does, lose the connection, not the process.
  spdlog::error("worker {}: session ended by exception: {}", ctx_.index, e.what());
  connection_ended();
}

void Worker::connection_ended() {
  active_.fetch_sub(1, std::memory_order_acq_rel);
  slot_free_.cancel();
}

net::awaitable<void> Worker::tick_loop() {
  // Deadlines of all sessions are checked here, every deadline_tick, instead of one timer per
  // I/O operation; idle pooled connections are swept once a second.
  auto next_sweep = ctx_.clock.now() + std::chrono::seconds(1);
  for (;;) {
    tick_timer_.expires_after(proxy::deadline_tick);
    co_await tick_timer_.async_wait(nothrow);
    const auto now = ctx_.clock.now();
    for (auto it = ctx_.sessions.begin(); it != ctx_.sessions.end();) {
      auto& s = *it++;
      if (s.deadline <= now) s.expire();
    }
    heap_trim_.observe(ctx_.sessions.size() - parking_.size());
    if (now >= next_sweep) {
      ctx_.pool.sweep();
      const auto shed = ctx_.shed_pools() + frames_.shed() + block_cache::shed();
      if (heap_trim_.due(ctx_.sessions.size() - parking_.size()) || shed >= proxy::trim_after_shed)
        proxy::trim_heap();
      next_sweep = now + std::chrono::seconds(1);
    }
    if (ctx_.stopping && ctx_.sessions.empty()) co_return;
  }
}

}  // namespace sluice
