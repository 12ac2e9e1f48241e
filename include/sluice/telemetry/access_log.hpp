#pragma once
// One line per request (text or JSON). The worker formats the line into a per-thread buffer and
// copies it into its own ring (line_ring.hpp): no lock, no allocation, no line shared with other
// workers, and never a wait for the disk (a line that does not fit is dropped and counted). The
// log's one writing thread drains every ring on a short timer, or at once when a ring fills past
// a mark, with one writev() per batch. Errors and lifecycle events go to the default (error)
// logger instead.
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <thread>

#include <spdlog/common.h>

#include "sluice/config/config.hpp"

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
  // The TLS client certificate on a listener with verify_client on ("" elsewhere): the
  // verification's result (SUCCESS, NONE, FAILED:reason) and the subject.
  std::string_view client_cert_verify;
  std::string_view client_cert_subject;
  std::string_view grpc_status;  // a gRPC call's grpc-status ("0", "14"), "" for any other request
};

// An AccessRecord that owns its text, for an exchange logged after the memory its views point
// into is gone (an Upgrade tunnel, logged when it closes, long after its HTTP session ended). One
// string holds every field's text; record() gives the views into it (movable: no view is kept).
class HeldAccessRecord {
public:
  explicit HeldAccessRecord(const AccessRecord& r);
  AccessRecord record() const;

private:
  AccessRecord numbers_;  // every field but the text ones
  std::string text_;
  std::array<std::pair<std::uint32_t, std::uint32_t>, 16> spans_{};  // offset, size per text field
};

class LogSink;
class LineRing;

// The buffering, fixed in production (docs/edge.md, "Logs"); tests shrink it.
struct AccessLogTuning {
  std::size_t ring_bytes = std::size_t{1} << 20;  // per worker thread
  std::size_t wake_bytes = std::size_t{64} << 10;  // a ring this full wakes the writer at once
  std::chrono::milliseconds interval{50};          // otherwise the writer drains this often
  // flush() and the destructor wait this long, together, for the writer: a stdout nobody reads
  // (or a stuck file) cannot hold the process's exit. Lines not written by then are lost.
  std::chrono::milliseconds exit_wait{2000};
};

class AccessLog {
public:
  // Lines go to `log.access_file` ("" = stdout). Throws std::runtime_error when it cannot be
  // opened. Starts the writing thread.
  explicit AccessLog(const config::LogSection& log, AccessLogTuning tuning = {});
  // Writes what the rings hold (bounded by exit_wait), then stops the writing thread; one stuck
  // in write() is left behind (detached; it owns what it uses) rather than waited for.
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;
  bool enabled() const noexcept { return format() != config::AccessLogFormat::off; }
  // Control thread (reload): records written after this use `format`. A worker may finish the
  // record it is formatting in the old one.
  void set_format(config::AccessLogFormat format);
  // Any thread; never blocks. Each thread gets its own ring at its first line (the one
  // allocation), so the lines of one thread stay in order; lines of different threads
  // interleave by batch.
  void write(const AccessRecord& r);
  // Every line written before the call is written out (or lost to a write error) when it returns
  // true; false = the writer did not finish within exit_wait (its output is blocked).
  bool flush();
  // Lines dropped because their thread's ring was full (sluice_access_log_dropped_total).
  std::uint64_t dropped() const;
  // The file the lines go to: reopened (SIGUSR1, admin API) or switched (reload) on the control
  // thread, between two batches.
  LogSink& sink() noexcept;

  struct Shared;  // the rings, the sink and the writer's state (access_log.cpp)

private:
  config::AccessLogFormat format() const noexcept { return format_.load(std::memory_order_relaxed); }
  LineRing& ring();  // this thread's
  void wake_writer();

  // Written only by a reload, read per request (a load, no write on the data path).
  std::atomic<config::AccessLogFormat> format_;
  const std::uint64_t id_;  // tells this log's rings from an earlier one's in thread_local state
  std::shared_ptr<Shared> shared_;  // also owned by the writing thread
  std::thread writer_;
  bool gave_up_ = false;  // flush() timed out: the destructor does not wait again
};

// "text", "json", "off": the name [log] access uses.
std::string_view access_format_name(config::AccessLogFormat format);

// Error-log set-up from [log]: level, error_format, and error_file ("" = stderr). Throws
// std::runtime_error when the file cannot be opened.
void configure_error_log(const config::LogSection& log);
// [log] level as spdlog's level.
spdlog::level::level_enum spdlog_level(config::LogLevel level);
// The error log's sink (after configure_error_log()), for reopen and reload.
LogSink& error_log_sink();
// [log] error_format, applied to the error log (control thread).
void set_error_format(config::ErrorLogFormat format);

// A client- or origin-controlled value in the text format, escaped so that a log parser cannot be
// fooled: `"` and `\` get a backslash, control bytes and DEL become \xHH. Appended to `out`.
void append_text_escaped(std::string& out, std::string_view s);

// The line for `r` in `format` (not off) into `out` (cleared first), without the text format's
// leading time and the newline, which write() adds. Allocation-free once `out` has grown.
void format_access_record(spdlog::memory_buf_t& out, const AccessRecord& r,
                          config::AccessLogFormat format);

}  // namespace sluice
