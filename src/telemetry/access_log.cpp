#include "sluice/telemetry/access_log.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <iterator>
#include <mutex>
#include <vector>

#include <spdlog/spdlog.h>

#include "sluice/telemetry/line_ring.hpp"
#include "sluice/telemetry/log_sink.hpp"

namespace sluice {

namespace {

using Buffer = spdlog::memory_buf_t;

void add(Buffer& out, std::string_view s) { out.append(s); }

template <class Out>
void escape_text(Out& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  append_escaped(out, s, [](Out& o, unsigned char c) {
    if (c == '"' || c == '\\') {
      const char esc[2] = {'\\', static_cast<char>(c)};
      o.append(std::string_view(esc, 2));
    } else {
      const char esc[4] = {'\\', 'x', hex[c >> 4], hex[c & 0xf]};
      o.append(std::string_view(esc, 4));
    }
  });
}

// A number without fmt's format-string parse (format_int writes the digits into a local array).
void add_uint(Buffer& out, std::uint64_t n) {
  const fmt::format_int digits(n);
  out.append(std::string_view(digits.data(), digits.size()));
}

std::string_view or_dash(std::string_view s) { return s.empty() ? std::string_view("-") : s; }

// Microseconds as milliseconds with three decimals ("12.345").
void add_ms(Buffer& out, std::chrono::microseconds d) {
  const auto us = d.count();
  if (us < 0) out.push_back('-');
  const auto abs = static_cast<std::uint64_t>(us < 0 ? -us : us);
  add_uint(out, abs / 1000);
  append_thousandths(out, static_cast<unsigned>(abs % 1000));
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

// `,"name":` then the value; one append (names are short literals).
void key(Buffer& out, std::string_view name) {
  char text[40] = {',', '"'};
  const auto n = std::min(name.size(), sizeof text - 4);
  std::memcpy(text + 2, name.data(), n);
  text[n + 2] = '"';
  text[n + 3] = ':';
  out.append(std::string_view(text, n + 4));
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
  add(out, ",\"status\":");
  add_uint(out, r.status);
  key(out, "route"); add_json_or_null(out, r.route);
  key(out, "upstream"); append_json_string(out, r.upstream);
  key(out, "server"); append_json_string(out, r.server);
  add(out, ",\"attempts\":");
  add_uint(out, r.attempts);
  key(out, "upstream_connect_ms"); add_json_ms_or_null(out, r.upstream_connect);
  key(out, "upstream_first_byte_ms"); add_json_ms_or_null(out, r.upstream_first_byte);
  add(out, ",\"bytes_in\":");
  add_uint(out, r.bytes_in);
  add(out, ",\"bytes_out\":");
  add_uint(out, r.bytes_out);
  key(out, "duration_ms"); add_ms(out, r.duration);
  key(out, "request_id"); append_json_string(out, r.request_id);
  key(out, "error"); add_json_or_null(out, r.error);
  key(out, "retry"); add_json_or_null(out, r.retry);
  key(out, "idempotency"); add_json_or_null(out, r.idempotency);
  key(out, "client_cert_verify"); add_json_or_null(out, r.client_cert_verify);
  key(out, "client_cert_subject"); add_json_or_null(out, r.client_cert_subject);
  key(out, "grpc_status"); add_json_or_null(out, r.grpc_status);
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
  add(out, "\" ");
  add_uint(out, r.status);
  add(out, " upstream=");
  add(out, or_dash(r.upstream));
  add(out, " server=");
  add(out, or_dash(r.server));
  add(out, " attempts=");
  add_uint(out, r.attempts);
  add(out, " in=");
  add_uint(out, r.bytes_in);
  add(out, " out=");
  add_uint(out, r.bytes_out);
  out.push_back(' ');
  add_ms(out, r.duration);
  add(out, "ms id=");
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
  if (!r.client_cert_verify.empty()) {
    add_quoted(out, "client_cert", r.client_cert_verify);
    add_quoted(out, "client_subject", r.client_cert_subject);
  }
  if (!r.grpc_status.empty()) {
    add(out, " grpc=");
    escape_text(out, r.grpc_status);
  }
}

void append_access_record(Buffer& out, const AccessRecord& r, config::AccessLogFormat format) {
  if (format == config::AccessLogFormat::json) format_json(out, r);
  else format_text(out, r);
}

}  // namespace

void append_text_escaped(std::string& out, std::string_view s) { escape_text(out, s); }

void format_access_record(Buffer& out, const AccessRecord& r, config::AccessLogFormat format) {
  out.clear();
  append_access_record(out, r, format);
}

std::string_view access_format_name(config::AccessLogFormat format) {
  switch (format) {
    case config::AccessLogFormat::text: return "text";
    case config::AccessLogFormat::json: return "json";
    case config::AccessLogFormat::off: break;
  }
  return "off";
}

// What the writing thread and the log share. Owned by both, so that a writer stuck in write()
// when the log goes can be left behind without touching freed memory.
struct AccessLog::Shared {
  Shared(const std::string& path, AccessLogTuning t) : sink(path, 1), tuning(t) {}

  LogSink sink;
  const AccessLogTuning tuning;
  std::mutex mutex;               // the fields below; never taken per line
  std::condition_variable wake;   // the writer waits on it, between batches
  std::condition_variable done;   // flush() and the destructor wait on it
  std::vector<std::unique_ptr<LineRing>> rings;  // one per thread that wrote a line
  bool kicked = false;    // a ring passed wake_bytes
  bool stopping = false;  // the log is going: one last batch
  bool exited = false;
  std::uint64_t flushes_asked = 0;
  std::uint64_t flushes_done = 0;
};

namespace {

std::atomic<std::uint64_t> next_log_id{1};

// Everything the rings hold now, in one writev() (more if the descriptor takes less). A write
// error loses the batch, as it lost the line before: the proxy goes on.
void write_batch(LogSink& sink, const std::vector<LineRing*>& rings, std::vector<iovec>& parts,
                 std::vector<std::size_t>& taken) {
  parts.clear();
  taken.clear();
  for (LineRing* ring : rings) {
    std::size_t n = 0;
    for (const auto part : ring->readable()) {
      if (part.empty()) continue;
      parts.push_back({const_cast<char*>(part.data()), part.size()});
      n += part.size();
    }
    taken.push_back(n);
  }
  if (!parts.empty()) sink.write_all(parts);
  for (std::size_t i = 0; i < rings.size(); ++i) rings[i]->consume(taken[i]);
}

// The writing thread: a batch every `interval`, at once when a ring passes wake_bytes or a flush
// is asked for; a last one when the log stops.
void write_loop(std::shared_ptr<AccessLog::Shared> s) {
  std::vector<LineRing*> rings;
  std::vector<iovec> parts;
  std::vector<std::size_t> taken;
  for (;;) {
    bool stop = false;
    std::uint64_t asked = 0;
    {
      std::unique_lock lock(s->mutex);
      s->wake.wait_for(lock, s->tuning.interval, [&] {
        return s->kicked || s->stopping || s->flushes_asked != s->flushes_done;
      });
      s->kicked = false;
      stop = s->stopping;
      asked = s->flushes_asked;  // lines written before these flush() calls are in the rings
      rings.clear();
      for (const auto& r : s->rings) rings.push_back(r.get());
    }
    write_batch(s->sink, rings, parts, taken);
    {
      std::lock_guard lock(s->mutex);
      s->flushes_done = asked;
      s->exited = stop;
    }
    s->done.notify_all();
    if (stop) return;
  }
}

}  // namespace

// The writer runs even while the format is "off", so that a reload can turn the log on.
AccessLog::AccessLog(const config::LogSection& log, AccessLogTuning tuning)
    : format_(log.access),
      id_(next_log_id.fetch_add(1, std::memory_order_relaxed)),
      shared_(std::make_shared<Shared>(log.access_file, tuning)),
      writer_(write_loop, shared_) {}

AccessLog::~AccessLog() {
  bool exited = false;
  {
    std::unique_lock lock(shared_->mutex);
    shared_->stopping = true;
    shared_->wake.notify_one();
    const auto wait = gave_up_ ? std::chrono::milliseconds(0) : shared_->tuning.exit_wait;
    exited = shared_->done.wait_for(lock, wait, [&] { return shared_->exited; });
  }
  if (exited) {
    writer_.join();
    return;
  }
  spdlog::warn("access log: output blocked, lines still buffered are lost");
  writer_.detach();  // owns `shared_`; ends with the process
}

void AccessLog::set_format(config::AccessLogFormat format) { format_.store(format, std::memory_order_relaxed); }

LogSink& AccessLog::sink() noexcept { return shared_->sink; }

bool AccessLog::flush() {
  std::unique_lock lock(shared_->mutex);
  const auto ticket = ++shared_->flushes_asked;
  shared_->wake.notify_one();
  const bool done = shared_->done.wait_for(lock, shared_->tuning.exit_wait,
                                           [&] { return shared_->flushes_done >= ticket; });
  if (!done) gave_up_ = true;
  return done;
}

std::uint64_t AccessLog::dropped() const {
  std::lock_guard lock(shared_->mutex);
  std::uint64_t n = 0;
  for (const auto& r : shared_->rings) n += r->dropped();
  return n;
}

LineRing& AccessLog::ring() {
  struct Mine {
    std::uint64_t log = 0;
    LineRing* ring = nullptr;
  };
  thread_local Mine mine;
  if (mine.log != id_) {  // this thread's first line to this log
    auto ring = std::make_unique<LineRing>(shared_->tuning.ring_bytes, shared_->tuning.wake_bytes);
    std::lock_guard lock(shared_->mutex);
    mine = {id_, ring.get()};
    shared_->rings.push_back(std::move(ring));
  }
  return *mine.ring;
}

void AccessLog::wake_writer() {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->kicked = true;
  }
  shared_->wake.notify_one();
}

namespace {

constexpr std::string_view AccessRecord::*held_text[] = {
    &AccessRecord::client,     &AccessRecord::method,     &AccessRecord::target,
    &AccessRecord::upstream,   &AccessRecord::server,     &AccessRecord::request_id,
    &AccessRecord::error,      &AccessRecord::retry,      &AccessRecord::protocol,
    &AccessRecord::host,       &AccessRecord::user_agent, &AccessRecord::route,
    &AccessRecord::idempotency, &AccessRecord::client_cert_verify, &AccessRecord::client_cert_subject,
    &AccessRecord::grpc_status};

}  // namespace

HeldAccessRecord::HeldAccessRecord(const AccessRecord& r) : numbers_(r) {
  static_assert(std::size(held_text) == std::tuple_size_v<decltype(spans_)>);
  std::size_t size = 0;
  for (const auto field : held_text) size += (r.*field).size();
  text_.reserve(size);
  for (std::size_t i = 0; i < std::size(held_text); ++i) {
    const auto value = r.*held_text[i];
    spans_[i] = {static_cast<std::uint32_t>(text_.size()), static_cast<std::uint32_t>(value.size())};
    text_.append(value);
    numbers_.*held_text[i] = {};
  }
}

AccessRecord HeldAccessRecord::record() const {
  AccessRecord r = numbers_;
  for (std::size_t i = 0; i < std::size(held_text); ++i)
    r.*held_text[i] = std::string_view(text_).substr(spans_[i].first, spans_[i].second);
  return r;
}

void AccessLog::write(const AccessRecord& r) {
  const auto format = this->format();
  if (format == config::AccessLogFormat::off) return;
  // One buffer per worker thread, keeping its capacity: no allocation here once warm.
  thread_local Buffer line;
  line.clear();
  if (format == config::AccessLogFormat::text) {
    append_local_iso_ms(line, std::chrono::system_clock::now());
    line.push_back(' ');
  }
  append_access_record(line, r, format);
  line.push_back('\n');
  if (ring().push(std::string_view(line.data(), line.size())) == LineRing::Push::wake) wake_writer();
}

namespace {

std::shared_ptr<LogSink>& error_sink() {
  static std::shared_ptr<LogSink> sink;
  return sink;
}

}  // namespace

spdlog::level::level_enum spdlog_level(config::LogLevel level) {
  switch (level) {
    case config::LogLevel::trace: return spdlog::level::trace;
    case config::LogLevel::debug: return spdlog::level::debug;
    case config::LogLevel::info: return spdlog::level::info;
    case config::LogLevel::warn: return spdlog::level::warn;
    case config::LogLevel::error: return spdlog::level::err;
  }
  return spdlog::level::info;
}

void configure_error_log(const config::LogSection& log) {
  auto sink = std::make_shared<LogSink>(log.error_file, 2);
  auto logger = std::make_shared<spdlog::logger>("sluice", sink);
  logger->set_level(spdlog_level(log.level));
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
    spdlog::default_logger()->set_formatter(text_log_formatter());
}

}  // namespace sluice
