#pragma once
// Idle keep-alive client connections, parked outside their session (docs/performance.md, "What an
// idle connection holds").
//
// A session waiting for the next request on a plain keep-alive connection for longer than
// park_after gives its connection here and ends: its DownstreamSession object, its coroutine frames and its
// buffers go back to the worker and the heap. What stays is a ParkedClient (the socket, the
// client's address, the idle deadline) in the worker's session list (for graceful shutdown,
// reload and the idle timeout) with one wait for readability on the socket. When the client
// sends its next request, the worker serves the connection with a fresh session, which starts
// with the bytes the kernel holds.
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

#include "sluice/core/clock.hpp"
#include "sluice/proxy/worker_context.hpp"
#include "sluice/tls/stream.hpp"

namespace sluice::proxy {

// How long a session waits for a next request before it parks its connection. Long enough that a
// client sending its requests back to back (the hot path: ~1 ms apart on each of 64 connections
// at 60k requests/s) never parks and wakes, which costs ~13k instructions (a wake allocates
// nothing: the session's frames and buffers come from the worker's pools). Short, because until
// then the connection holds a whole session: while a client opens connections at 5k/s, the
// sessions of the last park_after are alive at once, and what they free when they park leaves
// holes between what stays (the parked records, Asio's reactor state per socket). At 100 ms an
// idle connection cost 0.6-1.1 KiB, at 25 ms 0.4-0.55 (docs/performance.md, session 17).
inline constexpr std::chrono::milliseconds park_after{25};

struct ParkedClient {
  tls::Stream stream;
  boost::asio::ip::address client;  // the peer, or the client its PROXY protocol header named
  Clock::time_point idle_until;     // the connection's idle_timeout ends here
};

// Fixed-size blocks carved from 13 KiB chunks, for the parked records and their waits: side by
// side in a few chunks instead of strewn, a few hundred bytes each, between the heap chunks that
// sessions free as they park (which left ~0.4 KiB of fragmentation per parked connection). When
// no block is in use the chunks beyond the first go back to the heap. A block fits the larger of
// the two (both static_asserts in parking.cpp): the record, 176 bytes with GCC 12 and Boost 1.81,
// and the wait's operation (tls/edge_io.hpp), 208 bytes while it carried Asio's handler_work and
// less since. 256-byte blocks left 128 bytes per parked connection unused. Anything larger goes to
// the heap, counted.
class Slab {
public:
  static constexpr std::size_t block_size = 176;
  static constexpr std::size_t blocks_per_chunk = 64;
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

// A standard allocator over a Slab (Asio allocates a wait's operation with it).
template <class T>
struct SlabAllocator {
  using value_type = T;
  explicit SlabAllocator(Slab* slab) noexcept : slab(slab) {}
  template <class U>
  SlabAllocator(const SlabAllocator<U>& other) noexcept : slab(other.slab) {}
  T* allocate(std::size_t n) { return static_cast<T*>(slab->allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { slab->deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const SlabAllocator<U>& o) const noexcept { return slab == o.slab; }
  Slab* slab;
};

class ParkingLot {
public:
  // `wake`: the client sent bytes (or closed): serve the connection again. `ended`: a parked
  // connection was closed (idle timeout, shutdown, reload) without waking.
  using Wake = std::function<void(ParkedClient)>;
  using Ended = std::function<void()>;
  ParkingLot(WorkerContext& worker, Wake wake, Ended ended)
      : worker_(worker), wake_(std::move(wake)), ended_(std::move(ended)) {}
  ParkingLot(const ParkingLot&) = delete;
  ParkingLot& operator=(const ParkingLot&) = delete;

  // Takes the connection; it joins the worker's session list until it wakes or ends.
  void park(ParkedClient client);
  std::size_t size() const noexcept { return parked_; }
  const Slab& slab() const noexcept { return slab_; }

  struct Parked;

private:
  struct Release {
    void operator()(Parked* p) const noexcept;
  };
  void on_ready(Parked& parked, boost::system::error_code ec);

  WorkerContext& worker_;
  Slab slab_;
  Wake wake_;
  Ended ended_;
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

// malloc_trim(0) where the C library has it (glibc); nothing elsewhere.
void trim_heap() noexcept;

}  // namespace sluice::proxy
