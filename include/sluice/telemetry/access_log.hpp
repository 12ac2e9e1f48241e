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

#include <spdlog/common.h>

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
  std::string_view protocol;    // "HTTP/1.1", "HTTP/1.0"; "" before a request line was parsed
  std::string_view host;        // the request's Host, "" when none
  std::string_view user_agent;  // "" when none
  std::string_view route;       // the route that matched ("*/api/"), "" without routes
  // Of the last attempt, from its start (pool or connect) to the connection being ready (0 for
  // a pooled one) and to the first byte of the response head; negative = not reached.
  std::chrono::microseconds upstream_connect{-1};
  std::chrono::microseconds upstream_first_byte{-1};
  std::string_view idempotency;  // the Idempotency-Key outcome (first, replayed, ...), or ""
};

class LogSink;

class AccessLog {
public:
  // Lines go to `log.access_file` ("" = stdout). Throws std::runtime_error when it cannot be
  // opened.
  explicit AccessLog(const config::LogSection& log);
  ~AccessLog();
  bool enabled() const noexcept { return format() != config::AccessLogFormat::off; }
  // Control thread (reload): records written after this use `format`. A worker may finish the
  // record it is formatting in the old one.
  void set_format(config::AccessLogFormat format);
  // Thread-safe (spdlog loggers are).
  void write(const AccessRecord& r);
  void flush();
  // The file the lines go to: reopened (SIGUSR1, admin API) or switched (reload) on the control
  // thread, between two lines.
  LogSink& sink() noexcept { return *sink_; }

private:
  config::AccessLogFormat format() const noexcept { return format_.load(std::memory_order_relaxed); }

  // Written only by a reload, read per request (a load, no write on the data path).
  std::atomic<config::AccessLogFormat> format_;
  std::shared_ptr<LogSink> sink_;
  std::shared_ptr<spdlog::details::thread_pool> pool_;  // the one thread that writes the lines
  std::shared_ptr<spdlog::logger> logger_;
};

// "text", "json", "off": the name [log] access uses.
std::string_view access_format_name(config::AccessLogFormat format);

// Error-log set-up from [log]: level, error_format, and error_file ("" = stderr). Throws
// std::runtime_error when the file cannot be opened.
void configure_error_log(const config::LogSection& log);
// The error log's sink (after configure_error_log()), for reopen and reload.
LogSink& error_log_sink();
// [log] error_format, applied to the error log (control thread).
void set_error_format(config::ErrorLogFormat format);

// A client- or origin-controlled value in the text format, escaped so that a log parser cannot be
// fooled: `"` and `\` get a backslash, control bytes and DEL become \xHH. Appended to `out`.
void append_text_escaped(std::string& out, std::string_view s);

// The line for `r` in `format` (not off) into `out` (cleared first), without the text format's
// leading time, which the logger's pattern adds. Allocation-free once `out` has grown.
void format_access_record(spdlog::memory_buf_t& out, const AccessRecord& r,
                          config::AccessLogFormat format);

}  // namespace sluice
