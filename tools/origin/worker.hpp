#pragma once
// One event loop and the connections it serves. A connection stays on the worker that accepted it
// for its whole life, so nothing on the data path is shared between threads except the
// origin_state counters. Everything here runs on the worker's own thread, except stop().

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/intrusive/list.hpp>
#include <chrono>
#include <optional>

#include "connection.hpp"

namespace sluice::origin {

class origin_state;

class worker {
 public:
  // idle_timeout: close connections that have waited that long for the client; none = never.
  worker(origin_state& state, std::optional<std::chrono::milliseconds> idle_timeout);
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  asio::io_context& context() { return context_; }
  origin_state& state() { return state_; }
  bool tracks_idle() const { return idle_timeout_.has_value(); }

  // Called by a connection when it starts; it leaves the list by itself when destroyed.
  void add(connection& c) { connections_.push_back(c); }

  // Runs the event loop on the calling thread until stop().
  void run();
  // Thread-safe: makes run() return promptly, abandoning open connections.
  void stop();

 private:
  void schedule_sweep();

  origin_state& state_;
  std::optional<std::chrono::milliseconds> idle_timeout_;
  // Declared before context_ so that it outlives it: destroying the context destroys the
  // coroutine frames that hold the connections, and they unlink themselves from this list.
  boost::intrusive::list<connection, boost::intrusive::constant_time_size<false>> connections_;
  // Hint 1: one thread runs this context, which lets Asio skip some locking.
  asio::io_context context_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  asio::steady_timer sweep_timer_;
};

}  // namespace sluice::origin
