#include "sluice/proxy/parking.hpp"

#include <memory>
#include <new>

#include <boost/asio/bind_allocator.hpp>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace sluice::proxy {

using boost::system::error_code;

// One parked connection. Owned by its pending wait's handler: it ends when the wait completes
// (readable, or cancelled by close()), never while the wait is pending.
struct ParkingLot::Parked final : SessionLink {
  Parked(ParkingLot& lot, ParkedClient c) : lot(lot), client(std::move(c)) {
    deadline = client.idle_until;
  }
  ~Parked() {
    if (is_linked()) lot.worker_.sessions.erase(lot.worker_.sessions.iterator_to(*this));
  }
  // The idle timeout passed; graceful shutdown or a reload closes idle connections; so does the
  // shutdown timeout. Closing cancels the wait, whose handler then ends the connection.
  void expire() override { close(); }
  void close_if_idle() override { close(); }
  void close() override {
    deadline = Clock::time_point::max();
    error_code ignored;
    client.stream.close(ignored);
  }
  bool holds_upstream() const noexcept override { return false; }

  ParkingLot& lot;
  ParkedClient client;
};

static_assert(sizeof(ParkingLot::Parked) <= Slab::block_size);

void* Slab::allocate(std::size_t n) {
  if (n > block_size) {
    ++oversized_;
    return ::operator new(n);
  }
  if (free_ == nullptr) {
    chunks_.push_back(std::make_unique<Block[]>(blocks_per_chunk));
    link(chunks_.back().get());
  }
  Block* b = free_;
  free_ = b->next;
  ++used_;
  return b;
}

void Slab::deallocate(void* p, std::size_t n) noexcept {
  if (n > block_size) return ::operator delete(p);
  auto* b = static_cast<Block*>(p);
  b->next = free_;
  free_ = b;
  if (--used_ == 0 && chunks_.size() > 1) {
    chunks_.resize(1);  // a burst of parked connections is over
    free_ = nullptr;
    link(chunks_.front().get());
  }
}

void Slab::link(Block* chunk) noexcept {
  for (std::size_t i = 0; i < blocks_per_chunk; ++i) {
    chunk[i].next = free_;
    free_ = &chunk[i];
  }
}

void ParkingLot::Release::operator()(Parked* p) const noexcept {
  Slab& slab = p->lot.slab_;
  p->~Parked();
  slab.deallocate(p, sizeof(Parked));
}

void ParkingLot::park(ParkedClient client) {
  std::unique_ptr<Parked, Release> parked(new (slab_.allocate(sizeof(Parked))) Parked(*this, std::move(client)));
  worker_.sessions.push_back(*parked);
  ++parked_;
  auto& socket = parked->client.stream.socket();
  auto ready = boost::asio::bind_allocator(SlabAllocator<void>(&slab_), [p = std::move(parked)](error_code ec) {
    p->lot.on_ready(*p, ec);
  });
  static_assert(sizeof(tls::edge::WaitOp<decltype(ready)>) <= Slab::block_size);
  tls::edge::async_wait_readable(socket, std::move(ready));
}

void ParkingLot::on_ready(Parked& parked, error_code ec) {
  --parked_;
  worker_.sessions.erase(worker_.sessions.iterator_to(parked));
  if (ec || !parked.client.stream.is_open()) {
    error_code ignored;
    parked.client.stream.close(ignored);
    ended_();
    return;
  }
  // Readable: a next request, or the client's FIN or reset, which the session reads as such.
  wake_(std::move(parked.client));
}

void trim_heap() noexcept {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

}  // namespace sluice::proxy
