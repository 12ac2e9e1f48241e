#pragma once
// One worker: an io_context run by one thread, its own SO_REUSEPORT acceptors, its sessions and
// its upstream connection pool. A connection lives on one worker for its whole life, so the data
// path needs no locks: the io_context runs with Asio's locking off. The control thread reaches a
// worker only through its Mailbox (the public methods below post there themselves) and reads
// active_sessions() and the handshake counts, atomics.
#include <atomic>
#include <exception>
#include <future>
#include <memory>
#include <thread>
#include <functional>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "sluice/core/pooled_frame.hpp"
#include "sluice/proxy/h2_session.hpp"
#include "sluice/proxy/parking.hpp"
#include "sluice/proxy/tunnel_session.hpp"
#include "sluice/proxy/worker_context.hpp"
#include "sluice/runtime/mailbox.hpp"

namespace sluice {

namespace proxy {
class DownstreamSession;
}

class Worker {
public:
  Worker(unsigned index, const Clock& clock, AccessLog& access_log,
         std::shared_ptr<const Snapshot> snapshot, std::uint32_t max_connections,
         const std::atomic<bool>& shutdown);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Any thread, before or after start(): accept on `fd`, a bound, listening socket this worker
  // now owns, under `id` (for remove_listener). `tls_listener`: index of its [[server.tls]]
  // entry (connections get that listener's certificates from the snapshot current when they are
  // accepted), or -1 for plain HTTP.
  void add_listener(std::uint64_t id, boost::asio::ip::tcp protocol, int fd, int tls_listener);
  // Any thread. Stops accepting on listener `id` and closes it; its connections go on.
  void remove_listener(std::uint64_t id);
  // Any thread. This worker's share of server.max_connections (a reload may change it).
  void set_max_connections(std::uint32_t max_connections);
  void start();
  void join();

  // Any thread. Requests that start after this see the new snapshot. `switched`, if set, runs on
  // the worker's thread once it has taken the snapshot.
  void publish(std::shared_ptr<const Snapshot> snapshot, std::function<void()> switched = {});
  // Any thread. Closes this worker's idle pooled connections to `endpoint` (drain).
  void close_idle(Endpoint& endpoint);
  // The same for an endpoint no snapshot may hold any more (gone at a reload or from DNS): kept
  // alive until the worker has closed them.
  void close_idle(std::shared_ptr<Endpoint> endpoint);
  // Any thread. Stop accepting, close idle connections, let in-flight requests finish.
  void begin_shutdown();
  // Any thread. Close every connection now and stop the loop.
  void stop();

  std::size_t active_sessions() const noexcept { return active_.load(std::memory_order_acquire); }
  // Any thread: how many of those are parked (idle keep-alive, without a session).
  std::size_t parked_connections() const noexcept { return parked_.load(std::memory_order_relaxed); }

  // Open upstream connections: in use by a session (connecting included) plus idle in the pool.
  // Counted on the worker's thread when asked (a metrics scrape), so the data path keeps no
  // counter for it; the future is ready once the worker ran the count.
  std::future<std::size_t> count_upstream_connections();
  // Any thread. Runs `done` on the worker's thread with its pool's idle connections by endpoint
  // id (the dashboard's "pooled" column, once a second); nothing is counted on the data path.
  void count_pooled(std::function<void(std::vector<std::uint32_t>)> done);
  // Any thread: TLS handshakes on this worker's listeners, completed and failed.
  std::uint64_t tls_handshakes() const noexcept { return ctx_.tls_handshakes.load(std::memory_order_relaxed); }
  std::uint64_t tls_handshake_failures() const noexcept {
    return ctx_.tls_handshake_failures.load(std::memory_order_relaxed);
  }

private:
  struct Listener {
    std::uint64_t id = 0;
    std::shared_ptr<boost::asio::ip::tcp::acceptor> acceptor;  // shared with its accept loop
  };

  boost::asio::awaitable<void> accept_loop(std::shared_ptr<boost::asio::ip::tcp::acceptor> acceptor,
                                           int tls_listener);
  boost::asio::awaitable<void> serve(boost::asio::ip::tcp::socket socket, boost::asio::ip::address peer,
                                    int tls_listener);
  // A parked connection the client sent its next request on (proxy/parking.hpp).
  boost::asio::awaitable<void> serve_parked(proxy::ParkedClient client);
  // After a 101: the connection as a byte tunnel, without its HTTP session (tunnel_session.hpp).
  boost::asio::awaitable<void> serve_tunnel(std::unique_ptr<proxy::TunnelHandoff> handoff);
  boost::asio::awaitable<void> serve_http2(std::unique_ptr<proxy::Http2Handoff> handoff);
  // After run(): a session that parked keeps its connection (and its slot); any other end frees it.
  void session_ended(proxy::DownstreamSession& session);
  // run() or the setup before it threw: log it and free the slot.
  void session_failed(const std::exception& e);
  // A client connection closed: one slot free below max_connections.
  void connection_ended();
  boost::asio::awaitable<void> tick_loop();

  // One thread runs this context and no other thread calls into it (the control thread posts to
  // mailbox_), so neither the scheduler nor the reactor locks: no mutex per handler or per
  // operation (~470 instructions per proxied request, bench/callgrind.sh).
  // The session coroutines' frames, while the loop runs on the worker's thread.
  FramePool frames_;
  boost::asio::io_context io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE};
  Mailbox mailbox_{io_};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  proxy::WorkerContext ctx_;
  std::vector<Listener> listeners_;  // worker thread only
  proxy::ParkingLot parking_;  // idle keep-alive connections, without their sessions
  proxy::HeapTrim heap_trim_;  // memory back to the system after a burst
  boost::asio::steady_timer slot_free_;  // wakes the accept loops when below max_connections
  boost::asio::steady_timer tick_timer_;  // session deadlines and pool expiry
  std::uint32_t max_connections_;  // worker thread only
  std::atomic<std::size_t> active_{0};
  std::atomic<std::size_t> parked_{0};  // parking_.size(), stored on the worker's thread for others
  std::thread thread_;
};

}  // namespace sluice

// serve() holds the connection's DownstreamSession in its frame: from the worker's FramePool too.
SLUICE_POOLED_COROUTINES(sluice::Worker);
