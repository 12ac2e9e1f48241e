#include "sluice/proxy/parking.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <new>
#include <system_error>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace sluice::proxy {

using boost::system::error_code;

namespace {
int make_epoll() {
  const int fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1 for parked connections");
  return fd;
}
}  // namespace

// One parked connection: the descriptor, out of every reactor but the lot's epoll set, and what
// its next session needs. Owned by the lot, which frees it when it wakes or ends.
struct ParkingLot::Parked final : SessionLink {
  // The idle deadline is SessionLink's `deadline`: the worker's tick expires the record then.
  Parked(ParkingLot& lot, int fd, bool v6, const boost::asio::ip::address& client, Clock::time_point idle_until)
      : lot(lot), client(client), fd(fd), v6(v6) {
    deadline = idle_until;
  }
  // The idle timeout passed; graceful shutdown or a reload closes idle connections; so does the
  // shutdown timeout.
  void expire() override { lot.end(*this); }
  void close_if_idle() override { lot.end(*this); }
  void close() override { lot.end(*this); }
  bool holds_upstream() const noexcept override { return false; }

  ParkingLot& lot;
  boost::asio::ip::address client;
  int fd;
  bool v6;
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

ParkingLot::ParkingLot(WorkerContext& worker, Wake wake, Ended ended)
    : worker_(worker), wake_(std::move(wake)), ended_(std::move(ended)), epoll_(make_epoll()), watch_(worker.io) {}

ParkingLot::~ParkingLot() {
  close_all(false);
  if (!watch_.is_open()) ::close(epoll_);  // else watch_ closes it
}

void ParkingLot::close_all(bool count_ended) noexcept {
  for (auto it = worker_.sessions.begin(); it != worker_.sessions.end();) {
    auto* parked = dynamic_cast<Parked*>(&*it++);
    if (parked == nullptr || &parked->lot != this) continue;
    ::close(parked->fd);
    drop(*parked);
    if (count_ended) ended_();
  }
}

void ParkingLot::park(ParkedClient c) {
  auto& socket = c.stream.socket();
  const bool v6 = tls::edge::impl(socket).protocol_.family() == AF_INET6;
  error_code ec;
  if (!watch_.is_open()) watch_.assign(epoll_, ec);  // on the worker's thread: the reactor takes no locks
  const int fd = ec ? -1 : socket.release(ec);      // out of the reactor: EPOLL_CTL_DEL
  if (ec) {
    c.stream.close(ec);
    ended_();
    return;
  }
  auto* parked = new (slab_.allocate(sizeof(Parked))) Parked(*this, fd, v6, c.client, c.idle_until);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;  // level-triggered: bytes that came before this count
  ev.data.ptr = parked;
  if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    ::close(fd);
    parked->~Parked();
    slab_.deallocate(parked, sizeof(Parked));
    ended_();
    return;
  }
  worker_.sessions.push_back(*parked);
  ++parked_;
  watch();
}

void ParkingLot::watch() {
  if (watching_ || parked_ == 0) return;
  watching_ = true;
  watch_.async_wait(boost::asio::posix::descriptor_base::wait_read, [this](error_code ec) { on_ready(ec); });
}

void ParkingLot::on_ready(error_code ec) {
  watching_ = false;
  if (ec && ec != boost::asio::error::operation_aborted) {
    // The set cannot be waited on (never seen): its connections are closed, as at their idle
    // timeout, rather than left to a wait that fails again at once.
    close_all(true);
    return;
  }
  if (!ec) {
    // Until the set has nothing ready: the reactor sees epoll_ edge-triggered.
    epoll_event events[32];
    for (;;) {
      const int n = ::epoll_wait(epoll_, events, 32, 0);
      if (n < 0 && errno == EINTR) continue;
      for (int i = 0; i < n; ++i) wake(*static_cast<Parked*>(events[i].data.ptr));
      if (n < 32) break;
    }
  }
  watch();
}

void ParkingLot::wake(Parked& parked) {
  // Readable: a next request, or the client's FIN or reset, which the session reads as such.
  const int fd = parked.fd;
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);  // else it would stay in the set, disarmed,
                                                    // and be called on at every packet
  ParkedClient client{tls::Stream(worker_.io), parked.client, parked.deadline};
  const auto protocol = parked.v6 ? boost::asio::ip::tcp::v6() : boost::asio::ip::tcp::v4();
  drop(parked);
  error_code ec;
  tls::edge::adopt(client.stream.socket(), protocol, fd, ec);  // back in the reactor; closes fd on failure
  if (ec) {
    ended_();
    return;
  }
  wake_(std::move(client));
}

void ParkingLot::end(Parked& parked) noexcept {
  ::close(parked.fd);  // which takes it out of epoll_ too
  drop(parked);
  if (parked_ == 0 && watching_) {
    error_code ignored;
    watch_.cancel(ignored);  // nothing to watch: the worker's io_context may run out of work
  }
  ended_();
}

void ParkingLot::drop(Parked& parked) noexcept {
  worker_.sessions.erase(worker_.sessions.iterator_to(parked));
  --parked_;
  parked.~Parked();
  slab_.deallocate(&parked, sizeof(Parked));
}

void trim_heap() noexcept {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

}  // namespace sluice::proxy
