// sluice-origin: the origin server behind sluice in integration tests, the demo and benchmarks.
// Behaviour per request is chosen with knobs (docs/origin.md). Single-threaded by default so that
// a benchmark measures the proxy; --threads spreads connections over more event loops.

#include <boost/asio/signal_set.hpp>
#include <boost/system/system_error.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "listener.hpp"
#include "options.hpp"
#include "origin_state.hpp"
#include "worker.hpp"

int main(int argc, char** argv) {
  using namespace sluice::origin;

  options opts;
  try {
    opts = parse_options(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "sluice-origin: " << e.what() << "\n" << usage;
    return 2;
  }
  if (opts.help) {
    std::cout << usage;
    return 0;
  }

  // Asio sends with MSG_NOSIGNAL, but a stray write to a closed pipe must not kill the origin.
  std::signal(SIGPIPE, SIG_IGN);

  origin_state state(opts.name);
  if (!opts.exec_log.empty()) {
    const int fd = ::open(opts.exec_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      std::cerr << "sluice-origin: cannot open " << opts.exec_log << ": " << std::strerror(errno)
                << "\n";
      return 1;
    }
    state.set_exec_log(fd);  // open for the life of the process
  }
  state.set_fail_every(opts.fail_every);
  state.set_slow(opts.slow_percent, opts.slow_ms);
  std::vector<std::unique_ptr<worker>> workers;
  for (unsigned i = 0; i < opts.threads; ++i)
    workers.push_back(std::make_unique<worker>(state, opts.idle_timeout));

  std::optional<listener> acceptor;
  try {
    acceptor.emplace(workers, opts.listen);
  } catch (const boost::system::system_error& e) {
    std::cerr << "sluice-origin: cannot listen on " << format_endpoint(opts.listen) << ": "
              << e.code().message() << "\n";
    return 1;
  }

  // Installed before the port is announced: a test may signal as soon as it has read the line.
  asio::signal_set signals(workers.front()->context(), SIGINT, SIGTERM);
  signals.async_wait([&workers](const boost::system::error_code& ec, int) {
    if (ec) return;
    for (auto& w : workers) w->stop();
  });
  acceptor->start();

  // The one line on stdout: tests parse it to learn the port.
  std::printf("listening %s\n", format_endpoint(acceptor->local_endpoint()).c_str());
  std::fflush(stdout);

  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < workers.size(); ++i)
    threads.emplace_back([&w = *workers[i]] { w.run(); });
  workers.front()->run();
  for (auto& t : threads) t.join();
  return 0;
}
