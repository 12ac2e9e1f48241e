#pragma once
// One line per request, through spdlog (text or JSON), written off the data path's critical
// section: formatting happens on the worker, the write on spdlog's async thread. Errors and
// lifecycle events go to the default (error) logger instead.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "sluice/config/config.hpp"

namespace spdlog {
class logger;
namespace details { class thread_pool; }
}  // namespace spdlog

namespace sluice {

struct AccessRecord {
  std::string_view client;
  std::string_view method;
  std::string_view target;
  unsigned status = 0;
  std::string_view upstream;  // "" when none was chosen
  std::string_view server;    // endpoint identity, "" when none
  unsigned attempts = 0;
  std::uint64_t bytes_in = 0;   // request body bytes from the client
  std::uint64_t bytes_out = 0;  // response body bytes to the client
  std::chrono::microseconds duration{0};
  std::string_view request_id;
  std::string_view error;  // Sluice-Error value when the proxy answered itself
  std::string_view retry;  // why the failure was not retried (budget, not_idempotent, ...), or ""
  std::string_view idempotency;  // the Idempotency-Key outcome (first, replayed, ...), or ""
};

class AccessLog {
public:
  explicit AccessLog(config::AccessLogFormat format);
  ~AccessLog();
  bool enabled() const noexcept { return format() != config::AccessLogFormat::off; }
  // Control thread (reload): records written after this use `format`. A worker may finish the
  // record it is formatting in the old one.
  void set_format(config::AccessLogFormat format);
  // Thread-safe (spdlog loggers are).
  void write(const AccessRecord& r);
  void flush();

private:
  config::AccessLogFormat format() const noexcept { return format_.load(std::memory_order_relaxed); }

  // Written only by a reload, read per request (a load, no write on the data path).
  std::atomic<config::AccessLogFormat> format_;
  std::shared_ptr<spdlog::details::thread_pool> pool_;  // the one thread that writes the lines
  std::shared_ptr<spdlog::logger> logger_;
};

// "text", "json", "off": the name [log] access uses.
std::string_view access_format_name(config::AccessLogFormat format);

// Error-log set-up: level from [log] level; lines go to stderr.
void configure_error_log(std::string_view level);

// A client- or origin-controlled value in the text format, escaped so that a log parser cannot be
// fooled: `"` and `\` get a backslash, control bytes and DEL become \xHH. Appended to `out`.
void append_text_escaped(std::string& out, std::string_view s);

}  // namespace sluice
