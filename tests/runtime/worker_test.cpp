// Worker: one thread, its listeners and its sessions, reached from another thread only through
// its public calls. Driven over loopback with plain blocking clients and a route that answers
// itself (no origin needed): it answers on a listener it was given, keeps to its share of
// max_connections, stops accepting on remove_listener and begin_shutdown, and a published
// snapshot serves the next request.
#include "sluice/runtime/worker.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"
#include "sluice/runtime/snapshot.hpp"

#include "loopback_client.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<const Snapshot> answering(EndpointDirectory& directory, const std::string& body,
                                          std::uint64_t version) {
  auto result = config::load_string(R"(
[server]
listen = ["127.0.0.1:0"]
[log]
access_file = "/dev/null"
[[route]]
path_prefix = "/"
return = { status = 200, body = ")" + body + R"(" }
)",
                                    "test.toml");
  if (!result.ok()) throw std::runtime_error(result.errors.at(0).message);
  return build_snapshot(std::make_shared<const config::Config>(std::move(*result.config)), directory, version);
}

// A bound, listening loopback socket, as the runtime hands a worker; `port` is where it listens.
int listening_socket(std::uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd, 64) != 0)
    throw std::runtime_error("listen");
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return fd;
}

using test::connect_to;

void send_get(int fd) {
  const std::string request = "GET / HTTP/1.1\r\nHost: test\r\n\r\n";
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
}

// What arrives within `wait` (stops early once `until` has arrived, or at EOF: "<eof>" appended).
std::string read_for(int fd, std::chrono::milliseconds wait, const std::string& until) {
  std::string in;
  const auto end = std::chrono::steady_clock::now() + wait;
  while (in.find(until) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left <= 0ms) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[4096];
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return in + "<eof>";
    in.append(buf, static_cast<std::size_t>(n));
  }
  return in;
}

constexpr auto patience = 10s;  // an awaited answer; only a broken worker waits this long

struct WorkerTest : ::testing::Test {
  config::LogSection log_section{.access_file = "/dev/null"};
  AccessLog access{log_section};
  EndpointDirectory directory{steady_clock()};
  std::atomic<bool> shutdown{false};
  std::uint16_t port = 0;
  std::unique_ptr<Worker> worker;
  std::vector<int> clients;

  void start(std::uint32_t max_connections = 100) {
    worker = std::make_unique<Worker>(0, steady_clock(), access, answering(directory, "v1", 1), max_connections,
                                      shutdown);
    worker->add_listener(1, boost::asio::ip::tcp::v4(), listening_socket(port), -1);
    worker->start();
  }
  int client() {
    const int fd = connect_to(port);
    if (fd >= 0) clients.push_back(fd);
    return fd;
  }
  ~WorkerTest() override {
    for (int fd : clients) ::close(fd);
    if (worker) {
      worker->stop();
      worker->join();
    }
  }
};

TEST_F(WorkerTest, AnswersOnTheListenerItWasGiven) {
  start();
  const int c = client();
  ASSERT_GE(c, 0);
  send_get(c);
  const auto answer = read_for(c, patience, "v1");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 ", 0), 0u) << answer;
  EXPECT_NE(answer.find("v1"), std::string::npos) << answer;
  EXPECT_EQ(worker->active_sessions(), 1u) << "the keep-alive connection stays open";
}

TEST_F(WorkerTest, KeepsToItsShareOfMaxConnections) {
  start(1);
  const int first = client();
  send_get(first);
  ASSERT_NE(read_for(first, patience, "v1").find("v1"), std::string::npos);
  const int second = client();  // the kernel completes it; the worker must not serve it yet
  ASSERT_GE(second, 0);
  send_get(second);
  EXPECT_EQ(read_for(second, 300ms, "v1"), "") << "a second connection over the limit is not served";
  EXPECT_EQ(worker->active_sessions(), 1u);
  ::shutdown(first, SHUT_RDWR);  // the first leaves: its slot frees the second
  EXPECT_NE(read_for(second, patience, "v1").find("v1"), std::string::npos);
}

TEST_F(WorkerTest, APublishedSnapshotServesTheNextRequest) {
  start();
  const int c = client();
  send_get(c);
  ASSERT_NE(read_for(c, patience, "v1").find("v1"), std::string::npos);
  std::promise<std::thread::id> switched_on;
  worker->publish(answering(directory, "v2", 2), [&] { switched_on.set_value(std::this_thread::get_id()); });
  auto switched = switched_on.get_future();
  ASSERT_EQ(switched.wait_for(patience), std::future_status::ready);
  EXPECT_NE(switched.get(), std::this_thread::get_id()) << "`switched` runs on the worker's thread";
  const int fresh = client();
  send_get(fresh);
  EXPECT_NE(read_for(fresh, patience, "v2").find("v2"), std::string::npos);
}

TEST_F(WorkerTest, ARemovedListenerIsClosed) {
  start();
  worker->remove_listener(1);
  // The close happens on the worker's thread: await it, bounded.
  const auto until = std::chrono::steady_clock::now() + patience;
  int c = 0;
  while ((c = connect_to(port)) >= 0 && std::chrono::steady_clock::now() < until) {
    ::close(c);
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(c, -1) << "connections to a removed listener are refused";
}

TEST_F(WorkerTest, BeginShutdownStopsAcceptingAndClosesIdleConnections) {
  start();
  const int idle = client();
  send_get(idle);
  ASSERT_NE(read_for(idle, patience, "v1").find("v1"), std::string::npos);
  shutdown = true;
  worker->begin_shutdown();
  EXPECT_EQ(read_for(idle, patience, "<never>"), "<eof>") << "an idle keep-alive connection is closed";
  const auto until = std::chrono::steady_clock::now() + patience;
  int c = 0;
  while ((c = connect_to(port)) >= 0 && std::chrono::steady_clock::now() < until) {
    ::close(c);
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(c, -1) << "no new connection is accepted";
}

}  // namespace
}  // namespace sluice
