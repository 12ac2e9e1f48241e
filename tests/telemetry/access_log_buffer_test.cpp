// The access log's per-worker rings and its writing thread: order, drops, flush, reopen, and an
// exit that a blocked output cannot hold.
#include "sluice/telemetry/access_log.hpp"
#include "sluice/telemetry/line_ring.hpp"
#include "sluice/telemetry/log_sink.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <initializer_list>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/pattern_formatter.h>

namespace sluice {
namespace {

std::string joined(const LineRing& ring) {
  const auto parts = ring.readable();
  return std::string(parts[0]) + std::string(parts[1]);
}

TEST(LineRing, KeepsOrderAcrossTheWrap) {
  LineRing ring(10, 10);
  EXPECT_EQ(ring.push("abcd\n"), LineRing::Push::queued);
  ring.consume(5);
  EXPECT_EQ(ring.push("efgh\n"), LineRing::Push::queued);
  EXPECT_EQ(ring.push("ijk\n"), LineRing::Push::queued);  // wraps: 5 bytes at the end, 4 at the start
  const auto parts = ring.readable();
  EXPECT_EQ(parts[0], "efgh\n");
  EXPECT_EQ(parts[1], "ijk\n");
  EXPECT_EQ(ring.used(), 9u);
  ring.consume(9);
  EXPECT_EQ(joined(ring), "");
}

TEST(LineRing, ALineThatDoesNotFitIsDroppedWholeAndCounted) {
  LineRing ring(10, 10);
  EXPECT_EQ(ring.push("123456\n"), LineRing::Push::queued);
  EXPECT_EQ(ring.push("7890\n"), LineRing::Push::dropped);  // 3 bytes free: nothing of it goes in
  EXPECT_EQ(ring.push("this line is longer than the ring\n"), LineRing::Push::dropped);
  EXPECT_EQ(ring.dropped(), 2u);
  EXPECT_EQ(joined(ring), "123456\n");
  ring.consume(7);  // the writer made room
  EXPECT_EQ(ring.push("7890\n"), LineRing::Push::queued);
  EXPECT_EQ(joined(ring), "7890\n");
  EXPECT_EQ(ring.dropped(), 2u);
}

TEST(LineRing, AsksForTheWriterOnceEachTimeItPassesTheMark) {
  LineRing ring(100, 10);
  EXPECT_EQ(ring.push("1234\n"), LineRing::Push::queued);
  EXPECT_EQ(ring.push("5678\n"), LineRing::Push::wake);  // 10 bytes waiting
  EXPECT_EQ(ring.push("9abc\n"), LineRing::Push::queued);  // asked already
  ring.consume(ring.used());
  EXPECT_EQ(ring.push("1234\n"), LineRing::Push::queued);
  EXPECT_EQ(ring.push("5678\n"), LineRing::Push::wake);  // drained, then past the mark again
}

void expect_spdlog_prefix(std::initializer_list<long long> times) {
  spdlog::pattern_formatter spdlog_format("%Y-%m-%dT%H:%M:%S.%e%z", spdlog::pattern_time_type::local, "");
  for (const long long ms : times) {
    spdlog::details::log_msg msg("access", spdlog::level::info, "");
    msg.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
    spdlog::memory_buf_t want, got;
    spdlog_format.format(msg, want);
    append_local_iso_ms(got, msg.time);
    EXPECT_EQ(std::string(got.data(), got.size()), std::string(want.data(), want.size()));
  }
}

// The text access log's time was spdlog's pattern; the lines keep it byte for byte.
TEST(LogTime, LocalPrefixIsSpdlogsPattern) {
  expect_spdlog_prefix({1796135405007LL, 1796135405999LL, 1796135407000LL, 1780000000123LL});
  // A zone west of UTC with half an hour (POSIX TZ: no zone file needed); other seconds, so that
  // the per-second cache is renewed.
  const char* was = std::getenv("TZ");
  const std::string saved = was ? was : "";
  ::setenv("TZ", "XST3:30", 1);
  ::tzset();
  expect_spdlog_prefix({1796135500001LL, 1796135600002LL});
  spdlog::memory_buf_t west;
  append_local_iso_ms(west, std::chrono::system_clock::time_point(std::chrono::milliseconds(1796135800004LL)));
  EXPECT_EQ(std::string(west.data(), west.size()), "2026-12-01T11:06:40.004-03:30");
  ::setenv("TZ", "XET-5:45", 1);
  ::tzset();
  expect_spdlog_prefix({1796135700003LL});
  if (was) ::setenv("TZ", saved.c_str(), 1);
  else ::unsetenv("TZ");
  ::tzset();
}

class AccessLogBuffer : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sluice-alog-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    section_.access = config::AccessLogFormat::text;
    section_.access_file = (dir_ / "access.log").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::string read(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  // A record whose request id names it.
  static void put(AccessLog& log, const std::string& id) {
    AccessRecord r;
    r.client = "127.0.0.1";
    r.method = "GET";
    r.target = "/";
    r.status = 200;
    r.request_id = id;
    log.write(r);
  }
  // `threads` threads at once, thread t writing ids "t-0", "t-1", ... up to per_thread lines.
  static void put_from_threads(AccessLog& log, int threads, int per_thread) {
    std::vector<std::thread> running;
    for (int t = 0; t < threads; ++t)
      running.emplace_back([&log, t, per_thread] {
        for (int i = 0; i < per_thread; ++i) put(log, std::to_string(t) + "-" + std::to_string(i));
      });
    for (auto& t : running) t.join();
  }
  static std::string id_of(const std::string& line) {
    const auto at = line.find(" id=") + 4;
    return line.substr(at, line.find(' ', at) - at);
  }

  std::filesystem::path dir_;
  config::LogSection section_;
};

TEST_F(AccessLogBuffer, EachThreadsLinesArriveWholeAndInOrder) {
  AccessLog log(section_);
  constexpr int per_thread = 2000;
  put_from_threads(log, 3, per_thread);
  ASSERT_TRUE(log.flush());
  const auto got = lines(read(section_.access_file));
  ASSERT_EQ(got.size(), 3u * per_thread);
  int next[3] = {0, 0, 0};
  for (const auto& line : got) {
    // The text format, whole: local time, then the record.
    ASSERT_EQ(line.substr(29, 22), " 127.0.0.1 \"GET /\" 200") << line;
    const auto id = id_of(line);
    const int t = id[0] - '0';
    ASSERT_EQ(id, std::to_string(t) + "-" + std::to_string(next[t])) << "out of order";
    ++next[t];
  }
  EXPECT_EQ(log.dropped(), 0u);
}

// Small rings that wrap many times while the writer drains them: every line is written whole or
// counted as dropped, and what one thread's lines keep is in its order.
TEST_F(AccessLogBuffer, SmallRingsThatWrapUnderThreadsLoseNothingUncounted) {
  AccessLog log(section_, {.ring_bytes = 4096, .wake_bytes = 1024, .interval = std::chrono::milliseconds(1)});
  constexpr int per_thread = 3000;
  put_from_threads(log, 2, per_thread);
  ASSERT_TRUE(log.flush());
  const auto got = lines(read(section_.access_file));
  EXPECT_EQ(got.size() + log.dropped(), 2u * per_thread);
  int last[2] = {-1, -1};
  for (const auto& line : got) {
    ASSERT_EQ(line.substr(29, 22), " 127.0.0.1 \"GET /\" 200") << line;
    const auto id = id_of(line);
    const int t = id[0] - '0';
    const int i = std::stoi(id.substr(2));
    ASSERT_GT(i, last[t]) << "out of order";
    last[t] = i;
  }
}

TEST_F(AccessLogBuffer, JsonLinesAreTheFormattedRecordOnePerLine) {
  section_.access = config::AccessLogFormat::json;
  AccessLog log(section_);
  log.write(AccessRecord{.client = "::1", .method = "GET", .target = "/x", .status = 404});
  ASSERT_TRUE(log.flush());
  const auto text = read(section_.access_file);
  ASSERT_EQ(lines(text).size(), 1u);
  EXPECT_EQ(text.rfind("{\"time\":\"", 0), 0u) << text;
  EXPECT_NE(text.find(",\"client\":\"::1\",\"method\":\"GET\",\"target\":\"/x\","), std::string::npos) << text;
  EXPECT_EQ(text.substr(text.size() - 2), "}\n");
}

TEST_F(AccessLogBuffer, AFullRingDropsAndCountsWithoutWaiting) {
  // Three lines fit; the writer only runs when asked (the timer is far, the mark out of reach).
  AccessLog probe_log(section_);
  put(probe_log, "0");
  ASSERT_TRUE(probe_log.flush());
  const std::size_t line = read(section_.access_file).size();
  std::filesystem::remove(section_.access_file);

  section_.access_file = (dir_ / "small.log").string();
  AccessLog log(section_, {.ring_bytes = 3 * line + line / 2, .wake_bytes = 4 * line,
                           .interval = std::chrono::hours(1), .exit_wait = std::chrono::seconds(10)});
  for (int i = 0; i < 10; ++i) put(log, std::to_string(i));
  EXPECT_EQ(log.dropped(), 7u);
  ASSERT_TRUE(log.flush());
  put(log, "after");  // the flush made room again
  ASSERT_TRUE(log.flush());
  const auto got = lines(read(section_.access_file));
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(id_of(got[0]), "0");
  EXPECT_EQ(id_of(got[2]), "2");
  EXPECT_EQ(id_of(got[3]), "after");
  EXPECT_EQ(log.dropped(), 7u);
}

TEST_F(AccessLogBuffer, TheDestructorWritesEveryLineWrittenBeforeIt) {
  {
    AccessLog log(section_, {.interval = std::chrono::hours(1)});
    for (int i = 0; i < 500; ++i) put(log, std::to_string(i));
  }
  const auto got = lines(read(section_.access_file));
  ASSERT_EQ(got.size(), 500u);
  EXPECT_EQ(id_of(got.back()), "499");
}

TEST_F(AccessLogBuffer, ReopenSendsLaterLinesToTheNewFile) {
  AccessLog log(section_);
  put(log, "before");
  ASSERT_TRUE(log.flush());
  std::filesystem::rename(section_.access_file, dir_ / "access.log.1");  // logrotate
  EXPECT_EQ(log.sink().reopen(), "");
  put(log, "after");
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(lines(read(dir_ / "access.log.1")).size(), 1u);
  const auto now = lines(read(section_.access_file));
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(id_of(now[0]), "after");
}

TEST_F(AccessLogBuffer, OffWritesNothingAndAReloadTurnsItOn) {
  section_.access = config::AccessLogFormat::off;
  AccessLog log(section_);
  EXPECT_FALSE(log.enabled());
  put(log, "off");
  log.set_format(config::AccessLogFormat::text);
  put(log, "on");
  ASSERT_TRUE(log.flush());
  const auto got = lines(read(section_.access_file));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(id_of(got[0]), "on");
}

// A pipe nobody reads (stdout of a process whose reader stopped): the worker's writes still
// return at once, and flush() and the destructor give up after exit_wait instead of hanging.
TEST_F(AccessLogBuffer, ABlockedOutputCannotHoldTheExit) {
  const auto fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  ASSERT_GT(::fcntl(reader, F_SETPIPE_SZ, 4096), 0);  // the smallest pipe: it fills for certain
  section_.access_file = fifo.string();
  constexpr int count = 2000;  // ~190 KB: more than the pipe holds, less than the ring
  const auto started = std::chrono::steady_clock::now();
  {
    AccessLog log(section_, {.exit_wait = std::chrono::milliseconds(200)});
    for (int i = 0; i < count; ++i) put(log, std::to_string(i));
    EXPECT_FALSE(log.flush());
    EXPECT_EQ(log.dropped(), 0u);
  }
  // Two waits of 200 ms at most (the destructor does not wait again after a failed flush); the
  // margin is for a loaded machine, far below a hang.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  // The writer left behind finishes once the pipe is read, and closes it: every line arrives.
  ASSERT_EQ(::fcntl(reader, F_SETFL, 0), 0);
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = ::read(reader, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0);
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(reader);
  EXPECT_EQ(lines(text).size(), static_cast<std::size_t>(count));
}

}  // namespace
}  // namespace sluice
