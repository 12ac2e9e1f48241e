#include "sluice/runtime/systemd.hpp"

#include <systemd/sd-daemon.h>
#include <time.h>

#include <cstdlib>

#include <spdlog/spdlog.h>

namespace sluice {

ServiceNotifier::ServiceNotifier(boost::asio::io_context& control)
    : enabled_(std::getenv("NOTIFY_SOCKET") != nullptr), watchdog_timer_(control) {
  std::uint64_t usec = 0;
  // 0: keep WATCHDOG_USEC/PID in the environment. sd_watchdog_enabled checks WATCHDOG_PID
  // against our PID, so a stale value from a parent is ignored.
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) watchdog_ = std::chrono::microseconds(usec);
}

void ServiceNotifier::send(const std::string& state) {
  if (!enabled_) return;
  if (const int r = sd_notify(0, state.c_str()); r < 0)
    spdlog::warn("sd_notify({}): {}", state.substr(0, state.find('\n')), std::strerror(-r));
}

void ServiceNotifier::ready(std::string_view status) {
  send("READY=1\nSTATUS=" + std::string(status));
}

void ServiceNotifier::reloading() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const auto usec = static_cast<unsigned long long>(ts.tv_sec) * 1'000'000ULL +
                    static_cast<unsigned long long>(ts.tv_nsec) / 1000ULL;
  send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec) + "\nSTATUS=reloading");
}

void ServiceNotifier::stopping() { send("STOPPING=1\nSTATUS=stopping"); }

void ServiceNotifier::status(std::string_view status) { send("STATUS=" + std::string(status)); }

void ServiceNotifier::main_pid(long pid) { send("MAINPID=" + std::to_string(pid)); }

void ServiceNotifier::start_watchdog() {
  if (!enabled_ || watchdog_.count() == 0) return;
  spdlog::info("systemd watchdog: pinging every {}ms", watchdog_.count() / 2000);
  ping();
}

void ServiceNotifier::stop_watchdog() { watchdog_timer_.cancel(); }

// Half the period, as sd_watchdog_enabled(3) recommends: one late ping is not a restart.
void ServiceNotifier::ping() {
  send("WATCHDOG=1");
  watchdog_timer_.expires_after(watchdog_ / 2);
  watchdog_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) ping();
  });
}

}  // namespace sluice
