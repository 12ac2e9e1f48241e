#include "sluice/telemetry/access_log.hpp"

#include <fmt/chrono.h>
#include <spdlog/async.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace sluice {

namespace {

// JSON string escaping for the few fields that carry client-controlled text.
void append_json_string(fmt::memory_buffer& out, std::string_view s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out.append(std::string_view("\\\"")); break;
      case '\\': out.append(std::string_view("\\\\")); break;
      default:
        if (c < 0x20 || c == 0x7f) fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
        else out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
}

std::string_view or_dash(std::string_view s) { return s.empty() ? std::string_view("-") : s; }

// The text format's values, escaped into `scratch` (cleared first); returns the escaped view.
std::string_view text(std::string& scratch, std::string_view s) {
  scratch.clear();
  append_text_escaped(scratch, s);
  return scratch;
}

}  // namespace

void append_text_escaped(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  for (const unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7f) {
      out.append("\\x");
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xf]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
}

// The logger exists even while the format is "off", so that a reload can turn it on.
// Its own thread pool (not spdlog's global one), so that the destructor can join the writing
// thread before the logger goes: a message in flight holds the logger, and its last reference
// must not be dropped on two threads at once.
AccessLog::AccessLog(config::AccessLogFormat format)
    : format_(format), pool_(std::make_shared<spdlog::details::thread_pool>(8192, 1)) {
  logger_ = std::make_shared<spdlog::async_logger>(
      "access", std::make_shared<spdlog::sinks::stdout_sink_mt>(), pool_,
      spdlog::async_overflow_policy::overrun_oldest);
  set_format(format);
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
  fmt::memory_buffer line;
  const auto us = r.duration.count();
  if (format == config::AccessLogFormat::json) {
    const auto now = std::chrono::system_clock::now();
    fmt::format_to(std::back_inserter(line), "{{\"time\":\"{:%Y-%m-%dT%H:%M:%S}Z\",\"client\":",
                   std::chrono::floor<std::chrono::seconds>(now));
    append_json_string(line, r.client);
    line.append(std::string_view(",\"method\":"));
    append_json_string(line, r.method);
    line.append(std::string_view(",\"target\":"));
    append_json_string(line, r.target);
    fmt::format_to(std::back_inserter(line), ",\"status\":{},\"upstream\":", r.status);
    append_json_string(line, r.upstream);
    line.append(std::string_view(",\"server\":"));
    append_json_string(line, r.server);
    fmt::format_to(std::back_inserter(line),
                   ",\"attempts\":{},\"bytes_in\":{},\"bytes_out\":{},\"duration_ms\":{}.{:03}",
                   r.attempts, r.bytes_in, r.bytes_out, us / 1000, us % 1000);
    line.append(std::string_view(",\"request_id\":"));
    append_json_string(line, r.request_id);
    if (!r.error.empty()) {
      line.append(std::string_view(",\"error\":"));
      append_json_string(line, r.error);
    }
    if (!r.retry.empty()) {
      line.append(std::string_view(",\"retry\":"));
      append_json_string(line, r.retry);
    }
    if (!r.idempotency.empty()) {
      line.append(std::string_view(",\"idempotency\":"));
      append_json_string(line, r.idempotency);
    }
    line.push_back('}');
  } else {
    // Method and target passed the strict scan (tokens, VCHAR) but may hold `"` or `\`; the id
    // and the error may come from the client or the origin. One thread-local scratch per value
    // kind keeps this allocation-free once warm.
    thread_local std::string method, target, id, error;
    fmt::format_to(std::back_inserter(line),
                   "{} \"{} {}\" {} upstream={} server={} attempts={} in={} out={} {}.{:03}ms id={}",
                   r.client, text(method, r.method), text(target, r.target), r.status,
                   or_dash(r.upstream), or_dash(r.server), r.attempts, r.bytes_in, r.bytes_out,
                   us / 1000, us % 1000, text(id, r.request_id));
    if (!r.error.empty())
      fmt::format_to(std::back_inserter(line), " error=\"{}\"", text(error, r.error));
    if (!r.retry.empty()) fmt::format_to(std::back_inserter(line), " retry={}", r.retry);
    if (!r.idempotency.empty()) fmt::format_to(std::back_inserter(line), " idempotency={}", r.idempotency);
  }
  logger_->info(std::string_view(line.data(), line.size()));
}

void configure_error_log(std::string_view level) {
  auto logger = spdlog::stderr_logger_mt("sluice");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  logger->set_level(spdlog::level::from_str(std::string(level)));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace sluice
