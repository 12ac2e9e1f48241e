#pragma once
// Idle keep-alive client connections, parked outside their session (docs/architecture.md, "Memory
// on the data path").
//
// A session waiting for the next request on a plain keep-alive connection for longer than
// park_after gives its connection here and ends: its DownstreamSession object, its coroutine
// frames and its buffers go back to the worker's pools. What stays is an 80-byte record (the
// descriptor, the client's address, the idle deadline) in the worker's session list (for graceful
// shutdown, reload and the idle timeout). The descriptor leaves the worker's reactor (Asio's
// per-socket state, ~200 bytes, goes back to the reactor's pool for the next socket) for the lot's
// own epoll set, which the reactor watches as one descriptor: one-shot, level-triggered
// readability. When the client sends its next request (or closes), the worker serves the
// connection with a fresh session over the same descriptor, back in the reactor, which starts
// with the bytes the kernel holds. A park and a wake cost four epoll_ctl calls between them; a
// client sending back to back never pays them.
//
// Not parked: TLS connections (their TLS engine may hold decrypted bytes the socket's readiness
// does not show), and connections with bytes already buffered (a pipelined request).
//
// Like everything a worker owns: its thread only, no locks.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "sluice/core/clock.hpp"
#include "sluice/proxy/worker_context.hpp"
#include "sluice/tls/stream.hpp"

namespace sluice::proxy {

// How long a session waits for a next request before it parks its connection. Long enough that a
// client sending its requests back to back (the hot path: ~1 ms apart on each of 64 connections
// at 60k requests/s) never parks and wakes, which costs ~13k instructions and four epoll_ctl
// calls (a wake allocates nothing: the session's frames and buffers come from the worker's
// pools). Short, because until then the connection holds a whole session: while a client opens
// connections at 5k/s, the sessions of the last park_after are alive at once, and what they free
// when they park leaves holes between what stays. With parked connections still in the reactor,
// an idle connection cost 0.5-1.0 KiB at 100 ms and 0.5-0.8 at 25 ms (bench/run.sh's idle
// scenario); out of it, 0.1-0.3.
inline constexpr std::chrono::milliseconds park_after{25};

struct ParkedClient {
  tls::Stream stream;
  boost::asio::ip::address client;  // the peer, or the client its PROXY protocol header named
  Clock::time_point idle_until;     // the connection's idle_timeout ends here
};

// Fixed-size blocks carved from 10 KiB chunks, for the parked records: side by side in a few chunks
// instead of strewn, one per connection, between the heap chunks that sessions free as they park
// (which left ~0.4 KiB of fragmentation per parked connection). When no block is in use the
// chunks beyond the first go back to the heap. A block fits the record (static_assert in
// parking.cpp: 80 bytes with GCC 12 and Boost 1.81). Anything larger goes to the heap, counted.
class Slab {
public:
  static constexpr std::size_t block_size = 80;
  static constexpr std::size_t blocks_per_chunk = 128;
  Slab() = default;
  Slab(const Slab&) = delete;
  Slab& operator=(const Slab&) = delete;

  void* allocate(std::size_t n);
  void deallocate(void* p, std::size_t n) noexcept;
  std::size_t chunks() const noexcept { return chunks_.size(); }
  std::size_t used() const noexcept { return used_; }
  // Allocations larger than a block, served by the heap instead.
  std::size_t oversized() const noexcept { return oversized_; }

private:
  union Block {
    Block* next;
    alignas(std::max_align_t) char bytes[block_size];
  };
  void link(Block* chunk) noexcept;

  std::vector<std::unique_ptr<Block[]>> chunks_;
  Block* free_ = nullptr;
  std::size_t used_ = 0;
  std::size_t oversized_ = 0;
};

class ParkingLot {
public:
  // `wake`: the client sent bytes (or closed): serve the connection again. `ended`: a parked
  // connection was closed (idle timeout, shutdown, reload) without waking.
  using Wake = std::function<void(ParkedClient)>;
  using Ended = std::function<void()>;
  // Throws std::system_error if the system gives no epoll instance.
  ParkingLot(WorkerContext& worker, Wake wake, Ended ended);
  // What is still parked is closed, not counted as ended (the worker is going).
  ~ParkingLot();
  ParkingLot(const ParkingLot&) = delete;
  ParkingLot& operator=(const ParkingLot&) = delete;

  // Takes the connection (plain, open, nothing buffered); it joins the worker's session list
  // until it wakes or ends. Closing a parked connection (SessionLink's expire, close_if_idle,
  // close) ends it at once: its record leaves the session list during that call.
  void park(ParkedClient client);
  std::size_t size() const noexcept { return parked_; }
  const Slab& slab() const noexcept { return slab_; }

  struct Parked;

private:
  void watch();
  void on_ready(boost::system::error_code ec);
  void wake(Parked& parked);
  void end(Parked& parked) noexcept;
  void drop(Parked& parked) noexcept;
  void close_all(bool count_ended) noexcept;

  WorkerContext& worker_;
  Slab slab_;
  Wake wake_;
  Ended ended_;
  int epoll_;  // the parked descriptors, one-shot each; owned by watch_ once it is registered
  boost::asio::posix::stream_descriptor watch_;  // epoll_ in the worker's reactor
  bool watching_ = false;  // a wait on watch_ is pending
  std::size_t parked_ = 0;
};

// Gives the heap's free memory back to the system after a burst of connections ends. glibc keeps
// the chunks a burst freed (sessions, frames, blocks beyond the pools' caps) in its heap, so the
// process stayed at its peak: 38 MB after a first burst of 1,000 connections with partial heads,
// 77 MB after ten. malloc_trim(0) returns their pages. Called from the worker's once-a-second
// sweep; trims only when the number of sessions fell by `drop` or more from its peak since the
// last trim, so a steady worker never pays for it.
class HeapTrim {
public:
  explicit HeapTrim(std::size_t drop = 64) : drop_(drop) {}
  // `sessions`: the worker's sessions now (parked connections not counted: they hold no session).
  void observe(std::size_t sessions) noexcept {
    if (sessions > peak_) peak_ = sessions;
  }
  // Whether to trim now (then the peak starts again from `sessions`).
  bool due(std::size_t sessions) noexcept {
    observe(sessions);
    if (peak_ < sessions + drop_) return false;
    peak_ = sessions;
    return true;
  }

private:
  std::size_t drop_;
  std::size_t peak_ = 0;
};

// The worker also trims after its pools shed this much (WorkerContext::shed_pools()): the blocks
// a burst left in them go back a second or two after the burst, when its sessions are gone.
inline constexpr std::size_t trim_after_shed = 1 << 20;

// malloc_trim(0) where the C library has it (glibc); nothing elsewhere.
void trim_heap() noexcept;

}  // namespace sluice::proxy
