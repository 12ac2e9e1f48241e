#include "sluice/telemetry/access_log.hpp"

#include <iterator>

#include <spdlog/async.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include "sluice/telemetry/log_sink.hpp"

namespace sluice {

namespace {

using Buffer = spdlog::memory_buf_t;

void add(Buffer& out, std::string_view s) { out.append(s); }

template <class Out>
void escape_text(Out& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  for (const unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7f) {
      const char esc[4] = {'\\', 'x', hex[c >> 4], hex[c & 0xf]};
      out.append(std::string_view(esc, 4));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
}

std::string_view or_dash(std::string_view s) { return s.empty() ? std::string_view("-") : s; }

// Microseconds as milliseconds with three decimals ("12.345").
void add_ms(Buffer& out, std::chrono::microseconds d) {
  const auto us = d.count();
  fmt::format_to(std::back_inserter(out), "{}.{:03}", us / 1000, us % 1000);
}

// JSON: a string, or null when empty.
void add_json_or_null(Buffer& out, std::string_view s) {
  if (s.empty()) add(out, "null");
  else append_json_string(out, s);
}

void add_json_ms_or_null(Buffer& out, std::chrono::microseconds d) {
  if (d.count() < 0) add(out, "null");
  else add_ms(out, d);
}

// `,"name":` then the value.
void key(Buffer& out, std::string_view name) {
  out.push_back(',');
  out.push_back('"');
  add(out, name);
  add(out, "\":");
}

void format_json(Buffer& out, const AccessRecord& r) {
  add(out, "{\"time\":\"");
  append_rfc3339_ms(out, std::chrono::system_clock::now());
  add(out, "\",\"client\":");
  append_json_string(out, r.client);
  key(out, "method"); append_json_string(out, r.method);
  key(out, "target"); append_json_string(out, r.target);
  key(out, "protocol"); add_json_or_null(out, r.protocol);
  key(out, "host"); add_json_or_null(out, r.host);
  key(out, "user_agent"); add_json_or_null(out, r.user_agent);
  fmt::format_to(std::back_inserter(out), ",\"status\":{}", r.status);
  key(out, "route"); add_json_or_null(out, r.route);
  key(out, "upstream"); append_json_string(out, r.upstream);
  key(out, "server"); append_json_string(out, r.server);
  fmt::format_to(std::back_inserter(out), ",\"attempts\":{}", r.attempts);
  key(out, "upstream_connect_ms"); add_json_ms_or_null(out, r.upstream_connect);
  key(out, "upstream_first_byte_ms"); add_json_ms_or_null(out, r.upstream_first_byte);
  fmt::format_to(std::back_inserter(out), ",\"bytes_in\":{},\"bytes_out\":{}", r.bytes_in, r.bytes_out);
  key(out, "duration_ms"); add_ms(out, r.duration);
  key(out, "request_id"); append_json_string(out, r.request_id);
  key(out, "error"); add_json_or_null(out, r.error);
  key(out, "retry"); add_json_or_null(out, r.retry);
  key(out, "idempotency"); add_json_or_null(out, r.idempotency);
  out.push_back('}');
}

// `name="value"`, escaped; "-" when empty.
void add_quoted(Buffer& out, std::string_view name, std::string_view value) {
  out.push_back(' ');
  add(out, name);
  add(out, "=\"");
  escape_text(out, or_dash(value));
  out.push_back('"');
}

void add_text_ms(Buffer& out, std::string_view name, std::chrono::microseconds d) {
  out.push_back(' ');
  add(out, name);
  out.push_back('=');
  if (d.count() < 0) {
    out.push_back('-');
    return;
  }
  add_ms(out, d);
  add(out, "ms");
}

// The fields up to id= are those of earlier versions, in their order (scripts parse them); the
// newer ones follow, then error= and retry= when set.
void format_text(Buffer& out, const AccessRecord& r) {
  add(out, r.client);
  add(out, " \"");
  // Method and target passed the strict scan (tokens, VCHAR) but may hold `"` or `\`; the id,
  // host, user agent and error may come from the client or the origin.
  escape_text(out, r.method);
  out.push_back(' ');
  escape_text(out, r.target);
  const auto us = r.duration.count();
  fmt::format_to(std::back_inserter(out),
                 "\" {} upstream={} server={} attempts={} in={} out={} {}.{:03}ms id=", r.status,
                 or_dash(r.upstream), or_dash(r.server), r.attempts, r.bytes_in, r.bytes_out,
                 us / 1000, us % 1000);
  escape_text(out, r.request_id);
  add(out, " proto=");
  add(out, or_dash(r.protocol));
  add_quoted(out, "host", r.host);
  add_quoted(out, "ua", r.user_agent);
  add(out, " route=");
  escape_text(out, or_dash(r.route));
  add_text_ms(out, "connect", r.upstream_connect);
  add_text_ms(out, "first_byte", r.upstream_first_byte);
  if (!r.error.empty()) add_quoted(out, "error", r.error);
  if (!r.retry.empty()) {
    add(out, " retry=");
    add(out, r.retry);
  }
  if (!r.idempotency.empty()) {
    add(out, " idempotency=");
    add(out, r.idempotency);
  }
}

}  // namespace

void append_text_escaped(std::string& out, std::string_view s) { escape_text(out, s); }

void format_access_record(Buffer& out, const AccessRecord& r, config::AccessLogFormat format) {
  out.clear();
  if (format == config::AccessLogFormat::json) format_json(out, r);
  else format_text(out, r);
}

// The logger exists even while the format is "off", so that a reload can turn it on.
// Its own thread pool (not spdlog's global one), so that the destructor can join the writing
// thread before the logger goes: a message in flight holds the logger, and its last reference
// must not be dropped on two threads at once.
AccessLog::AccessLog(const config::LogSection& log)
    : format_(log.access),
      sink_(std::make_shared<LogSink>(log.access_file, 1)),
      pool_(std::make_shared<spdlog::details::thread_pool>(8192, 1)) {
  logger_ = std::make_shared<spdlog::async_logger>("access", sink_, pool_,
                                                   spdlog::async_overflow_policy::overrun_oldest);
  set_format(log.access);
}

void AccessLog::set_format(config::AccessLogFormat format) {
  // A JSON record carries its own time field; a text line gets spdlog's ISO time in front.
  logger_->set_pattern(format == config::AccessLogFormat::json ? "%v" : "%Y-%m-%dT%H:%M:%S.%e%z %v");
  format_.store(format, std::memory_order_relaxed);
}

std::string_view access_format_name(config::AccessLogFormat format) {
  switch (format) {
    case config::AccessLogFormat::text: return "text";
    case config::AccessLogFormat::json: return "json";
    case config::AccessLogFormat::off: break;
  }
  return "off";
}

AccessLog::~AccessLog() {
  flush();
  pool_.reset();  // writes what is queued, then joins the thread
  logger_.reset();
}

void AccessLog::flush() {
  if (logger_) logger_->flush();
}

void AccessLog::write(const AccessRecord& r) {
  const auto format = this->format();
  if (format == config::AccessLogFormat::off) return;
  // One buffer per worker thread, keeping its capacity: no allocation here once warm.
  thread_local Buffer line;
  format_access_record(line, r, format);
  logger_->info(std::string_view(line.data(), line.size()));
}

namespace {

std::shared_ptr<LogSink>& error_sink() {
  static std::shared_ptr<LogSink> sink;
  return sink;
}

}  // namespace

void configure_error_log(const config::LogSection& log) {
  auto sink = std::make_shared<LogSink>(log.error_file, 2);
  auto logger = std::make_shared<spdlog::logger>("sluice", sink);
  logger->set_level(spdlog::level::from_str(log.level));
  logger->flush_on(spdlog::level::info);
  error_sink() = sink;
  spdlog::set_default_logger(logger);
  set_error_format(log.error_format);
}

LogSink& error_log_sink() { return *error_sink(); }

void set_error_format(config::ErrorLogFormat format) {
  if (format == config::ErrorLogFormat::json)
    spdlog::default_logger()->set_formatter(std::make_unique<JsonLogFormatter>());
  else
    spdlog::default_logger()->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l %v");
}

}  // namespace sluice
