#pragma once
// How other threads hand work to a worker. A worker's io_context runs without any locking
// (BOOST_ASIO_CONCURRENCY_HINT_UNSAFE: no scheduler mutex, no reactor mutexes), which is only
// sound while no other thread calls into it, so net::post() from the control thread is out.
// Instead the control thread appends to this queue, under its own mutex, and writes an eventfd
// that the worker's reactor watches; the worker takes the whole queue at once and runs it in
// order. The data path never touches the mutex: it is taken once per control message (a reload,
// a drain, a metrics count), not per request. (Envoy's Dispatcher::post and nginx's
// ngx_notify work the same way: a locked list and one wake-up descriptor.)
#include <functional>
#include <mutex>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

namespace sluice {

class Mailbox {
public:
  explicit Mailbox(boost::asio::io_context& io);
  ~Mailbox();
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  // Any thread: `task` runs on the thread that runs run() (or drain()), after every task posted
  // before it. Tasks posted after close() run only if drain() is called.
  void post(std::function<void()> task);

  // The worker's thread: runs the posted tasks as they arrive, until close().
  boost::asio::awaitable<void> run();
  // The worker's thread (typically from a task): run() returns once the current batch is done.
  void close();
  // The thread that owns the io_context once nobody runs it (after the worker's thread was
  // joined): runs what is still queued. Returns how many tasks ran.
  std::size_t drain();

private:
  std::size_t run_batch();

  const int fd_;  // the eventfd: written by post() on any thread, closed by the destructor
  boost::asio::posix::stream_descriptor event_;  // watches fd_ on the worker's reactor
  bool closed_ = false;  // worker thread only

  std::mutex mutex_;
  std::vector<std::function<void()>> queue_;  // guarded by mutex_
  bool signalled_ = false;  // guarded by mutex_: fd_ was written since the worker last took the queue
  std::vector<std::function<void()>> batch_;  // worker thread only: the queue being run
};

}  // namespace sluice
