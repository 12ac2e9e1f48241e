#pragma once
// Where a log's lines go: a file ([log] access_file / error_file) or a standard stream, through
// one spdlog sink that can be pointed at a new file between two lines (logrotate's postrotate
// `kill -USR1`, POST /api/logs/reopen, a reload that changes the path) without losing either.
//
// Lines are written by the access log's writer thread (write_all(), a batch at a time) or by
// whichever thread spdlog calls the sink on (the thread logging an error); reopen()/adopt() come
// from the control thread. The sink's mutex orders them: a line or a batch is written to the old
// file or to the new one, whole.
#include <array>
#include <chrono>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include <sys/uio.h>

#include <spdlog/sinks/base_sink.h>

namespace sluice {

class LogSink final : public spdlog::sinks::base_sink<std::mutex> {
public:
  // `path` "" = `standard_fd` (1 or 2), which is never closed nor reopened. Throws
  // std::runtime_error("cannot open PATH: reason") when the file cannot be opened.
  LogSink(std::string path, int standard_fd);
  ~LogSink() override;
  LogSink(const LogSink&) = delete;
  LogSink& operator=(const LogSink&) = delete;

  // Opens `path` for the log (O_APPEND, created 0644); nothing changes yet. Returns the
  // descriptor; throws like the constructor. "" = the standard stream (returns -1).
  static int open(const std::string& path);
  // From now on, lines go to `fd` (from open(), owned from now on; -1 = the standard stream)
  // named `path`; the previous file is closed after the line being written, if any.
  void adopt(int fd, std::string path);
  // The same path opened again: after logrotate renamed the file, a new one is created. Returns
  // "" or why not (the old file stays in use). A standard stream has nothing to reopen.
  std::string reopen();
  std::string path();
  // Writes the buffers in order (the access log's batch: a few per worker), as few writev() as
  // the descriptor takes, under the lock reopen()/adopt() take: a batch goes whole to the old
  // file or whole to the new one. The buffers are modified (advanced past what was written).
  // false = a write error: the rest is lost, the proxy goes on.
  bool write_all(std::span<struct iovec> parts);

private:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  bool write_locked(std::span<struct iovec> parts);
  void flush_() override {}

  const int standard_fd_;
  int fd_;            // standard_fd_ or a file's descriptor
  std::string path_;  // "" for the standard stream
  spdlog::memory_buf_t formatted_;  // keeps its capacity: no allocation per line once warm
};

// "2026-12-01T14:30:05.123Z": RFC 3339 (§5.6) in UTC with milliseconds, appended to `out`.
// Allocation-free; the date part is cached per thread for the current second.
void append_rfc3339_ms(spdlog::memory_buf_t& out, std::chrono::system_clock::time_point t);

// "2026-12-01T14:30:05.123+01:00": the local time with milliseconds and the UTC offset, as spdlog's
// pattern "%Y-%m-%dT%H:%M:%S.%e%z" writes it (the text access log's and error log's prefix).
// Allocation-free; the date part and offset are cached per thread for the current second.
void append_local_iso_ms(spdlog::memory_buf_t& out, std::chrono::system_clock::time_point t);

// ".123": thousandths (0..999) as three decimals, after a whole number of seconds or milliseconds.
inline void append_thousandths(spdlog::memory_buf_t& out, unsigned n) {
  const char f[4] = {'.', static_cast<char>('0' + n / 100), static_cast<char>('0' + n / 10 % 10),
                     static_cast<char>('0' + n % 10)};
  out.append(std::string_view(f, 4));
}

// The bytes both log formats escape in a value: `"`, `\`, control bytes and DEL.
inline constexpr auto log_escaped_bytes = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = true;
  t['"'] = t['\\'] = t[0x7f] = true;
  return t;
}();

// `s` appended to `out` with every byte of log_escaped_bytes replaced by `escape(out, byte)`;
// the runs between them are appended whole (most values have none: one table load per byte).
template <class Out, class Escape>
void append_escaped(Out& out, std::string_view s, Escape escape) {
  std::size_t plain = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (!log_escaped_bytes[c]) continue;
    out.append(s.substr(plain, i - plain));
    plain = i + 1;
    escape(out, c);
  }
  out.append(s.substr(plain));
}

// JSON string (RFC 8259 §7) of `s`, quotes included: `"` and `\` escaped, control bytes and DEL as
// \u00XX. Bytes ≥ 0x80 pass as they are.
void append_json_string(spdlog::memory_buf_t& out, std::string_view s);

// A level as the config spells it ([log] level): "warn", not spdlog's "warning", so that what
// an operator greps for is what they configured.
std::string_view level_name(spdlog::level::level_enum level);

// The error log's text format: "TIME LEVEL MESSAGE", LEVEL by level_name().
std::unique_ptr<spdlog::formatter> text_log_formatter();

// The error log's JSON format ([log] error_format = "json"): one object per line,
// {"time":"...","level":"info","message":"..."}.
class JsonLogFormatter final : public spdlog::formatter {
public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

}  // namespace sluice
