#include "sluice/runtime/mailbox.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sluice {

namespace net = boost::asio;

namespace {

int open_eventfd() {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  return fd;
}

}  // namespace

Mailbox::Mailbox(net::io_context& io) : fd_(open_eventfd()), event_(io) { event_.assign(fd_); }

Mailbox::~Mailbox() {
  // Taken back from event_ rather than closed by it: fd_ is this class's, closed once.
  event_.release();
  ::close(fd_);
}

void Mailbox::post(std::function<void()> task) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
    wake = !signalled_;
    signalled_ = true;
  }
  if (!wake) return;
  const std::uint64_t one = 1;
  // Cannot fail short of a counter at 2^64 - 1: the worker resets it before every batch.
  [[maybe_unused]] const auto n = ::write(fd_, &one, sizeof one);
}

std::size_t Mailbox::run_batch() {
  std::uint64_t count = 0;
  [[maybe_unused]] const auto n = ::read(fd_, &count, sizeof count);  // EAGAIN: already reset
  {
    std::lock_guard lock(mutex_);
    signalled_ = false;  // a post from now on writes fd_ again, after the read above
    batch_.swap(queue_);
  }
  const std::size_t ran = batch_.size();
  for (auto& task : batch_) task();
  batch_.clear();  // keeps its capacity: the next swap hands it to the producers
  return ran;
}

net::awaitable<void> Mailbox::run() {
  constexpr auto nothrow = net::as_tuple(net::use_awaitable);
  while (!closed_) {
    // Asio's async_wait re-arms the descriptor (epoll_ctl MOD), so a write made while no wait
    // was queued is reported all the same.
    auto [ec] = co_await event_.async_wait(net::posix::descriptor_base::wait_read, nothrow);
    if (ec || closed_) co_return;
    run_batch();
  }
}

void Mailbox::close() {
  closed_ = true;
  boost::system::error_code ignored;
  event_.cancel(ignored);
}

std::size_t Mailbox::drain() {
  std::size_t ran = 0;
  for (std::size_t n = run_batch(); n > 0; n = run_batch()) ran += n;
  return ran;
}

}  // namespace sluice
