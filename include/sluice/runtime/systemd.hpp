#pragma once
// systemd service notifications (sd_notify(3), Type=notify): READY=1 once sluice serves,
// RELOADING=1 / READY=1 around a reload, STOPPING=1 at SIGTERM, a STATUS= line, and WATCHDOG=1
// pings when the unit sets WatchdogSec= (WATCHDOG_USEC in the environment).
//
// Without NOTIFY_SOCKET (not started by systemd, or Type=simple) every call is a no-op, so the
// runtime calls them unconditionally. The environment is left as it is: a binary upgrade's new
// process notifies the same socket (its PID becomes the main PID with MAINPID=).
//
// Threads: constructed and used on the control thread only; the watchdog timer runs there too, so
// a stuck control loop stops the pings and systemd restarts the service.
#include <chrono>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace sluice {

class ServiceNotifier {
public:
  explicit ServiceNotifier(boost::asio::io_context& control);
  ServiceNotifier(const ServiceNotifier&) = delete;
  ServiceNotifier& operator=(const ServiceNotifier&) = delete;

  bool enabled() const noexcept { return enabled_; }
  // READY=1 with a status line. Also used after a reload (systemd leaves "reloading").
  void ready(std::string_view status);
  // RELOADING=1 with MONOTONIC_USEC (required by Type=notify-reload, harmless for Type=notify).
  void reloading();
  void stopping();
  void status(std::string_view status);
  // MAINPID=pid: a binary upgrade hands the service over to its new process.
  void main_pid(long pid);
  // Starts WATCHDOG=1 pings at half the period systemd asked for; nothing without WATCHDOG_USEC.
  void start_watchdog();
  void stop_watchdog();

  std::chrono::microseconds watchdog_period() const noexcept { return watchdog_; }

private:
  void send(const std::string& state);
  void ping();

  bool enabled_;
  std::chrono::microseconds watchdog_{0};
  boost::asio::steady_timer watchdog_timer_;
};

}  // namespace sluice
