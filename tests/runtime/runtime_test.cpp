// Runtime: the whole process through its public interface, as main() drives it: run() on a
// thread of its own with a config file whose listener takes port 0 and whose route answers
// itself (no origin needed); the port and every step are read from the error log (a sink on the
// default logger), the signals are the ones an operator sends (SIGHUP reloads, SIGTERM stops).
// A signal goes only after the "started" line, which run() writes once its handlers are in: a
// signal before that would take the default action on the whole test process.
#include "sluice/runtime/runtime.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "sluice/config/loader.hpp"

#include "loopback_client.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

constexpr auto patience = 10s;  // an awaited line or answer; only a broken runtime waits this long

// Keeps every line the runtime logs, for the test to wait on.
class LineSink final : public spdlog::sinks::base_sink<std::mutex> {
public:
  // The first line matching `pattern`, waiting for it: the match and its groups (copies: the
  // lines move as more arrive), empty after `patience`.
  std::vector<std::string> wait_for(const std::string& pattern) {
    const std::regex rx(pattern);
    std::unique_lock lock(lines_mutex_);
    std::vector<std::string> groups;
    const auto found = [&] {
      std::smatch m;
      for (const auto& l : lines_) {
        if (!std::regex_search(l, m, rx)) continue;
        groups.assign(m.begin(), m.end());
        return true;
      }
      return false;
    };
    arrived_.wait_for(lock, patience, found);
    return groups;
  }
  std::size_t count(const std::string& pattern) {
    const std::regex rx(pattern);
    std::lock_guard lock(lines_mutex_);
    std::size_t n = 0;
    for (const auto& l : lines_) n += std::regex_search(l, rx);
    return n;
  }

protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    {
      std::lock_guard lock(lines_mutex_);
      lines_.emplace_back(msg.payload.data(), msg.payload.size());
    }
    arrived_.notify_all();
  }
  void flush_() override {}

private:
  std::mutex lines_mutex_;
  std::condition_variable arrived_;
  std::vector<std::string> lines_;
};

using test::connect_to;

// One GET on a new connection: the whole answer (up to EOF, `Connection: close` asked), or
// "<refused>".
std::string get(std::uint16_t port) {
  const int fd = connect_to(port);
  if (fd < 0) return "<refused>";
  const std::string request = "GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
  std::string in;
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    const auto end = std::chrono::steady_clock::now() + patience;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      if (left <= 0ms || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[4096];
      const auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return in;
}

std::string config_text(const std::string& body) {
  return R"([server]
listen = ["127.0.0.1:0"]
workers = 1
shutdown_timeout = "2s"
[log]
access_file = "/dev/null"
[[route]]
path_prefix = "/"
return = { status = 200, body = ")" +
         body + "\" }\n";
}

struct RuntimeTest : ::testing::Test {
  std::filesystem::path dir;
  std::string path;
  std::shared_ptr<LineSink> lines = std::make_shared<LineSink>();
  std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  std::future<int> exit_code;
  std::uint16_t port = 0;

  RuntimeTest() {
    dir = std::filesystem::temp_directory_path() /
          ("sluice-runtime-test-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir);
    path = (dir / "sluice.toml").string();
    auto logger = std::make_shared<spdlog::logger>("runtime-test", lines);
    logger->set_level(spdlog::level::info);
    spdlog::set_default_logger(logger);
  }
  ~RuntimeTest() override {
    if (exit_code.valid() && exit_code.wait_for(0s) != std::future_status::ready) {
      ::kill(::getpid(), SIGTERM);  // started: its handler is in
      exit_code.wait_for(patience);
    }
    spdlog::set_default_logger(previous);
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }

  void write(const std::string& text) const { std::ofstream(path) << text; }

  // Loads the file as main() does and runs the runtime on its own thread; waits for "started".
  void start() {
    auto loaded = config::load_file(path);
    ASSERT_TRUE(loaded.ok()) << loaded.errors.at(0).to_string();
    exit_code = std::async(std::launch::async, [cfg = std::move(*loaded.config), p = path]() mutable {
      Runtime runtime(std::move(cfg), p);
      return runtime.run();
    });
    const auto listening = lines->wait_for(R"(listening on 127\.0\.0\.1:(\d+))");
    ASSERT_FALSE(listening.empty()) << "no listening line";
    port = static_cast<std::uint16_t>(std::stoi(listening[1]));
    ASSERT_FALSE(lines->wait_for(R"(started: pid \d+, 1 worker\(s\), config .* \(version 1\))").empty());
  }
};

TEST_F(RuntimeTest, ServesReloadsOnSighupAndStopsOnSigterm) {
  write(config_text("v1"));
  start();
  const auto first = get(port);
  EXPECT_EQ(first.rfind("HTTP/1.1 200 ", 0), 0u) << first;
  EXPECT_TRUE(first.ends_with("\r\n\r\nv1")) << first;

  // SIGHUP: the file is read again; the next request is served by version 2.
  write(config_text("v2"));
  ::kill(::getpid(), SIGHUP);
  ASSERT_FALSE(lines->wait_for(R"(reloaded .*sluice\.toml \(config version 2\))").empty());
  const auto second = get(port);
  EXPECT_TRUE(second.ends_with("\r\n\r\nv2")) << second;
  // The same listener: a reload that keeps the address keeps the socket.
  EXPECT_EQ(lines->count("listening on "), 1u);

  // SIGTERM: a graceful stop; run() returns 0 and the port is closed.
  ::kill(::getpid(), SIGTERM);
  ASSERT_EQ(exit_code.wait_for(patience), std::future_status::ready);
  EXPECT_EQ(exit_code.get(), 0);
  EXPECT_EQ(lines->count("^sluice stopped$"), 1u);
  EXPECT_EQ(lines->count(R"(signal 15: graceful shutdown)"), 1u);
  EXPECT_EQ(get(port), "<refused>");
}

TEST_F(RuntimeTest, ARejectedReloadKeepsTheRunningConfig) {
  write(config_text("v1"));
  start();
  write(config_text("v2") + "[server.nonsense]\n");
  ::kill(::getpid(), SIGHUP);
  ASSERT_FALSE(lines->wait_for(R"(reload of .*sluice\.toml failed: 1 error\(s\); the previous configuration keeps serving)")
                   .empty());
  EXPECT_EQ(lines->count("^reload rejected: .*sluice\\.toml:"), 1u);
  const auto answer = get(port);
  EXPECT_TRUE(answer.ends_with("\r\n\r\nv1")) << answer;

  // The next good file is version 2: a rejected one does not use up a version.
  write(config_text("v3"));
  ::kill(::getpid(), SIGHUP);
  ASSERT_FALSE(lines->wait_for(R"(reloaded .*sluice\.toml \(config version 2\))").empty());
  EXPECT_TRUE(get(port).ends_with("\r\n\r\nv3"));
}

TEST_F(RuntimeTest, AnUnusableListenAddressEndsRunWithOne) {
  // 192.0.2.1 (TEST-NET-1) is no address of this machine: the bind fails, run() says why and
  // returns 1 before it announces anything or installs anything that outlives it.
  write(R"([server]
listen = ["192.0.2.1:8080"]
workers = 1
[log]
access_file = "/dev/null"
[[route]]
path_prefix = "/"
return = { status = 200, body = "x" }
)");
  auto loaded = config::load_file(path);
  ASSERT_TRUE(loaded.ok()) << loaded.errors.at(0).to_string();
  Runtime runtime(std::move(*loaded.config), path);
  EXPECT_EQ(runtime.run(), 1);
  EXPECT_EQ(lines->count("^cannot listen on 192\\.0\\.2\\.1:8080: cannot assign requested address$"), 1u);
  EXPECT_EQ(lines->count("started"), 0u);
}

}  // namespace
}  // namespace sluice
