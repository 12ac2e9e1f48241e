#include "sluice/telemetry/log_sink.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <ctime>
#include <stdexcept>
#include <system_error>

#include <spdlog/pattern_formatter.h>

#include "sluice/core/log_file.hpp"

namespace sluice {

LogSink::LogSink(std::string path, int standard_fd)
    : standard_fd_(standard_fd), fd_(standard_fd) {
  const int fd = open(path);  // before `path` is moved into adopt()'s parameter
  adopt(fd, std::move(path));
}

LogSink::~LogSink() {
  if (fd_ != standard_fd_) ::close(fd_);
}

int LogSink::open(const std::string& path) {
  if (path.empty()) return -1;
  const int fd = open_log_file(path);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::system_category().message(-fd));
  return fd;
}

void LogSink::adopt(int fd, std::string path) {
  int old = -1;
  {
    std::lock_guard lock(mutex_);  // between two lines
    old = fd_;
    fd_ = fd >= 0 ? fd : standard_fd_;
    path_ = fd >= 0 ? std::move(path) : std::string();
  }
  if (old != standard_fd_ && old != fd_) ::close(old);
}

std::string LogSink::reopen() {
  const std::string current = path();
  if (current.empty()) return "";
  try {
    adopt(open(current), current);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string LogSink::path() {
  std::lock_guard lock(mutex_);
  return path_;
}

void LogSink::sink_it_(const spdlog::details::log_msg& msg) {
  formatted_.clear();
  formatter_->format(msg, formatted_);
  // One write() per line, as spdlog's stdout sink flushes every line: a line is visible to
  // `tail -f` at once, and with O_APPEND it never interleaves with another process's.
  struct iovec part{formatted_.data(), formatted_.size()};
  write_locked(std::span(&part, 1));
}

bool LogSink::write_all(std::span<struct iovec> parts) {
  std::lock_guard lock(mutex_);
  return write_locked(parts);
}

bool LogSink::write_locked(std::span<struct iovec> parts) {
  while (!parts.empty()) {
    if (parts.front().iov_len == 0) {
      parts = parts.subspan(1);
      continue;
    }
    const auto n = ::writev(fd_, parts.data(), static_cast<int>(std::min<std::size_t>(parts.size(), IOV_MAX)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // disk full, closed stream: the lines are lost, the proxy goes on
    auto left = static_cast<std::size_t>(n);
    while (left > 0) {  // a short write: skip what went out, go on with the rest
      auto& p = parts.front();
      const auto k = std::min(left, p.iov_len);
      p.iov_base = static_cast<char*>(p.iov_base) + k;
      p.iov_len -= k;
      left -= k;
      if (p.iov_len == 0) parts = parts.subspan(1);
    }
  }
  return true;
}

namespace {

// The calendar form of the last second a thread formatted, per caller: gmtime_r / localtime_r
// (which may read the zone file) run once a second, not once a line.
struct SecondCache {
  std::time_t secs = -1;
  char date[20] = {};  // "YYYY-MM-DDTHH:MM:SS"
  char offset[6] = {};  // "+HH:MM", as spdlog's %z (from tm_gmtoff: "+00:00" for gmtime_r)
};

using ToTm = std::tm* (*)(const std::time_t*, std::tm*);

void refill(SecondCache& c, std::time_t secs, ToTm to_tm) {
  std::tm tm{};
  to_tm(&secs, &tm);
  std::strftime(c.date, sizeof c.date, "%Y-%m-%dT%H:%M:%S", &tm);
  long minutes = tm.tm_gmtoff / 60;
  c.offset[0] = minutes < 0 ? '-' : '+';
  if (minutes < 0) minutes = -minutes;
  c.offset[1] = static_cast<char>('0' + minutes / 600 % 10);
  c.offset[2] = static_cast<char>('0' + minutes / 60 % 10);
  c.offset[3] = ':';
  c.offset[4] = static_cast<char>('0' + minutes % 60 / 10);
  c.offset[5] = static_cast<char>('0' + minutes % 10);
  c.secs = secs;
}

// "YYYY-MM-DDTHH:MM:SS.mmm" of `t`, without a zone.
void append_date_ms(spdlog::memory_buf_t& out, std::chrono::system_clock::time_point t, SecondCache& c,
                    ToTm to_tm) {
  using namespace std::chrono;
  const auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count();
  const auto secs = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);  // down, also before 1970
  const auto milli = static_cast<unsigned>(ms - static_cast<long long>(secs) * 1000);
  if (secs != c.secs) refill(c, secs, to_tm);
  out.append(std::string_view(c.date, 19));
  append_thousandths(out, milli);
}

}  // namespace

void append_rfc3339_ms(spdlog::memory_buf_t& out, std::chrono::system_clock::time_point t) {
  thread_local SecondCache cache;
  append_date_ms(out, t, cache, ::gmtime_r);
  out.push_back('Z');
}

void append_local_iso_ms(spdlog::memory_buf_t& out, std::chrono::system_clock::time_point t) {
  thread_local SecondCache cache;
  append_date_ms(out, t, cache, ::localtime_r);
  out.append(std::string_view(cache.offset, 6));
}

void append_json_string(spdlog::memory_buf_t& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out.push_back('"');
  append_escaped(out, s, [](spdlog::memory_buf_t& o, unsigned char c) {
    if (c == '"' || c == '\\') {
      const char esc[2] = {'\\', static_cast<char>(c)};
      o.append(std::string_view(esc, 2));
    } else {
      const char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xf]};
      o.append(std::string_view(esc, 6));
    }
  });
  out.push_back('"');
}

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  dest.append(std::string_view("{\"time\":\""));
  append_rfc3339_ms(dest, msg.time);
  dest.append(std::string_view("\",\"level\":"));
  append_json_string(dest, level_name(msg.level));
  dest.append(std::string_view(",\"message\":"));
  append_json_string(dest, std::string_view(msg.payload.data(), msg.payload.size()));
  dest.append(std::string_view("}\n"));
}

std::string_view level_name(spdlog::level::level_enum level) {
  if (level == spdlog::level::warn) return "warn";
  const auto name = spdlog::level::to_string_view(level);
  return {name.data(), name.size()};
}

namespace {

// %L in the text pattern: level_name().
class LevelFlag final : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const auto name = level_name(msg.level);
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<LevelFlag>(); }
};

}  // namespace

std::unique_ptr<spdlog::formatter> text_log_formatter() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<LevelFlag>('L').set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %L %v");
  return formatter;
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

}  // namespace sluice
