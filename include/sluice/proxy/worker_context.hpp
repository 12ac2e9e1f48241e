#pragma once
// What one worker owns and its sessions share. Every member is touched only by the worker's own
// thread (the io_context's single runner): no locks. The control thread talks to a worker only by
// posting to its io_context.
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/intrusive/list.hpp>

#include "sluice/proxy/h2_upstream.hpp"
#include "sluice/compress/encoder.hpp"
#include "sluice/core/arena.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/string_pool.hpp"
#include "sluice/http/date.hpp"
#include "sluice/http/request_id.hpp"
#include "sluice/proxy/snapshot.hpp"
#include "sluice/telemetry/access_log.hpp"
#include "sluice/upstream/pool.hpp"

namespace sluice::proxy {

// What a worker needs of its sessions at shutdown. DownstreamSession implements it; the list is intrusive
// so that registering a connection allocates nothing.
class SessionLink : public boost::intrusive::list_base_hook<> {
public:
  // When the operation under way must have completed. The worker's tick (every
  // deadline_tick) calls expire() on sessions past it, which cancels their sockets: one cheap
  // assignment per I/O instead of a timer operation per I/O.
  Clock::time_point deadline = Clock::time_point::max();
  virtual void expire() = 0;

  // Graceful shutdown: close now if waiting for a next request, else after the current answer.
  virtual void close_if_idle() = 0;
  // Shutdown timeout: close now whatever is happening.
  virtual void close() = 0;
  // An upstream connection is in use (connecting, or carrying this request or tunnel).
  virtual bool holds_upstream() const noexcept = 0;

protected:
  ~SessionLink() = default;
};
using SessionList = boost::intrusive::list<SessionLink, boost::intrusive::constant_time_size<true>>;

// An operation's error as its session reports it: cancelled by the session's expire()
// (`timed_out`), operation_aborted is beast::error::timeout.
inline boost::system::error_code timed_error(boost::system::error_code ec, bool timed_out) noexcept {
  return ec == boost::asio::error::operation_aborted && timed_out
             ? boost::system::error_code(boost::beast::error::timeout)
             : ec;
}

inline constexpr std::chrono::milliseconds deadline_tick{25};
inline constexpr std::size_t arena_block_size = 32 * 1024;  // both heads of one exchange
inline constexpr std::size_t head_block_size = 1024;        // a client's read buffer, at first
inline constexpr std::size_t head_grown_size = 4 * 1024;    // then, for a head past 1 KiB
inline constexpr std::size_t relay_block_size = 64 * 1024;  // body bytes per read/write step
// A compressed answer's encoder writes into the relay block's last 16 KiB; the origin's body is
// read into the rest.
inline constexpr std::size_t coded_block_size = 16 * 1024;
// What a client connection's socket may hold written but not yet sent (TCP_NOTSENT_LOWAT, set
// on the listeners; its wait for room wakes at half of it). The response relay reads from the
// origin only what fits under it (DownstreamSession::client_room()): a client that reads slowly
// leaves the rest of its answer in the origin's socket, not in sluice's memory or the kernel's.
inline constexpr std::size_t client_unsent_max = 128 * 1024;

struct WorkerContext {
  WorkerContext(unsigned index, boost::asio::io_context& io, const Clock& clock, AccessLog& access_log)
      : index(index), io(io), clock(clock), pool(clock), access_log(access_log) {}

  unsigned index;
  boost::asio::io_context& io;
  const Clock& clock;
  ConnectionPool pool;
  // HTTP/2 connections to the servers of h2c and h2 upstreams (shared by the requests).
  H2Connections h2;
  http::RequestIdGenerator ids;
  http::HttpDate date;  // the Date sluice writes (RFC 9110 §6.6.1), formatted once a second
  AccessLog& access_log;
  // The newest config snapshot; a session takes its own reference at the start of a request.
  std::shared_ptr<const Snapshot> snapshot;
  // Set by graceful shutdown: answers carry Connection: close, idle sessions are closed.
  // `stopping` is this worker's own flag (set when the shutdown post runs); `shutdown` is the
  // process-wide one the control thread sets before posting, so that no worker serves a new
  // request as if nothing happened while its post is still queued.
  bool stopping = false;
  const std::atomic<bool>* shutdown = nullptr;
  bool is_stopping() const noexcept {
    return stopping || (shutdown != nullptr && shutdown->load(std::memory_order_relaxed));
  }
  SessionList sessions;
  // TLS listeners' handshakes, completed and failed; written by this worker only (plain load and
  // store), summed by the control thread for /metrics.
  std::atomic<std::uint64_t> tls_handshakes{0};
  std::atomic<std::uint64_t> tls_handshake_failures{0};
  // Uniform in [0, 1) for backoff jitter: per worker, no locks.
  double uniform() noexcept { return unit_interval(splitmix64(rng_state)); }
  std::uint64_t rng_state = 0x853c49e6748fea9bull;
  // Request-scoped memory, recycled (see core/arena.hpp): head arenas and body relay buffers,
  // and the head read buffers, which start with a 1 KiB block (nginx's client_header_buffer_size:
  // most request heads fit, and a connection that sends half a head pins no more), move to a
  // 4 KiB one for a longer head and to an arena-sized one only for a head that needs it. Each pool
  // keeps at most its cap of free blocks (4 + 8 + 1 + 32 MiB at most per worker: an HTTP/2 client
  // has hundreds of streams in flight, each with its arena and its origin read buffer); what a burst took
  // beyond that goes back to the heap when it ends, and the heap to the system (see HeapTrim).
  BlockPool arena_blocks{arena_block_size, 1024};
  BlockPool relay_blocks{relay_block_size, 128};
  BlockPool grown_head_blocks{head_grown_size, 1024, &arena_blocks};
  BlockPool head_blocks{head_block_size, 1024, &grown_head_blocks};
  // Sessions' and HTTP/2 streams' head strings (core/string_pool.hpp): 2048 of at most 4 KiB
  // (three per stream in flight).
  StringPool head_strings{2048, 4096};
  // Compressed responses' encoders (compress/encoder.hpp): idle library contexts and freed
  // blocks kept for the next responses. Like the block pools above, it outlives what it lends:
  // the worker's sessions (whose exchanges hold the encoders) end before its context goes.
  compress::EncoderPool encoders;

  // Called once a second: the pools free what the last second did not need (BlockPool::shed()),
  // so that after a burst the worker keeps what its traffic uses, not the burst's peak. Returns
  // the bytes freed.
  std::size_t shed_pools() noexcept {
    return head_blocks.shed() + grown_head_blocks.shed() + arena_blocks.shed() + relay_blocks.shed() +
           head_strings.shed() + shed_encoders();
  }
  std::size_t shed_encoders() noexcept {
    const auto held = encoders.stats().cached_bytes;
    encoders.shed();
    return held;
  }
};

}  // namespace sluice::proxy
