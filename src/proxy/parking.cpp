#include "sluice/proxy/parking.hpp"

#include <memory>

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

void ParkingLot::park(ParkedClient client) {
  auto parked = std::make_unique<Parked>(*this, std::move(client));
  worker_.sessions.push_back(*parked);
  ++parked_;
  auto& socket = parked->client.stream.socket();
  socket.async_wait(tls::Stream::socket_type::wait_read,
                    [this, p = std::move(parked)](error_code ec) { on_ready(*p, ec); });
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
