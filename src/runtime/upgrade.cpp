#include "sluice/runtime/upgrade.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

extern char** environ;

namespace sluice {

namespace {

constexpr std::string_view ready_env = "SLUICE_UPGRADE_READY_FD";
constexpr std::string_view state_env = "SLUICE_UPGRADE_STATE_FD";

bool is_listen_var(std::string_view var) {
  return var.starts_with("LISTEN_PID=") || var.starts_with("LISTEN_FDS=") ||
         var.starts_with("LISTEN_FDNAMES=") || var.starts_with("SLUICE_UPGRADE_READY_FD=") ||
         var.starts_with("SLUICE_UPGRADE_STATE_FD=");
}

// A memfd holding `text`, read from offset 0 by the new process; -1 when it cannot be made (the
// upgrade then goes on without the state, as before a state existed: logged).
int state_memfd(std::string_view text) {
  const int fd = ::memfd_create("sluice-upgrade-state", MFD_CLOEXEC);
  if (fd < 0) {
    spdlog::warn("upgrade: memfd_create: {}; the new process starts without this one's drains and "
                 "health state", std::strerror(errno));
    return -1;
  }
  std::size_t done = 0;
  while (done < text.size()) {
    const auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      spdlog::warn("upgrade: writing the state for the new process: {}; it starts without this "
                   "one's drains and health state", std::strerror(errno));
      ::close(fd);
      return -1;
    }
    done += static_cast<std::size_t>(n);
  }
  return fd;
}

// Writes `value` in decimal into `out` (at least 21 bytes) without allocating: runs after fork.
void write_decimal(char* out, long value) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0);
  for (int i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  out[n] = '\0';
}

// The child between fork and exec: only async-signal-safe calls (the parent has threads).
// Sockets go to 3.., the ready pipe after them, the state memfd (if any) after that.
[[noreturn]] void exec_child(const char* binary, char* const* argv, char* const* envp,
                             char* pid_value, const std::vector<int>& fds, int ready_fd, int state_fd) {
  write_decimal(pid_value, static_cast<long>(::getpid()));
  const int n = static_cast<int>(fds.size());
  // Move every source out of the way first, so that dup2 onto 3.. never clobbers one.
  int moved[64];
  for (int i = 0; i < n; ++i) moved[i] = ::fcntl(fds[static_cast<std::size_t>(i)], F_DUPFD, 3 + n + 2);
  const int ready = ::fcntl(ready_fd, F_DUPFD, 3 + n + 2);
  const int state = state_fd >= 0 ? ::fcntl(state_fd, F_DUPFD, 3 + n + 2) : -1;
  for (int i = 0; i < n; ++i) ::dup2(moved[i], 3 + i);  // dup2: not close-on-exec
  ::dup2(ready, 3 + n);
  if (state >= 0) ::dup2(state, 3 + n + 1);
  ::execve(binary, argv, envp);
  _exit(127);
}

// What execve gets, built before fork: the child may not allocate. The environment is this
// process's without a previous hand-over's variables, plus the sockets' (systemd's protocol), the
// ready pipe's and the state's; LISTEN_PID's value is left blank for the child to fill in.
struct ExecImage {
  std::vector<std::string> env;
  std::vector<char*> envp;
  std::vector<std::string> argv_text;
  std::vector<char*> argv;
  char* pid_value = nullptr;  // LISTEN_PID's value, 24 bytes
  std::vector<int> fds;

  ExecImage(const std::string& binary, const std::vector<std::string>& args,
            const std::vector<PassedSocket>& sockets, bool with_state) {
    for (char** e = environ; *e != nullptr; ++e)
      if (!is_listen_var(*e)) env.emplace_back(*e);
    std::string names;
    for (const auto& s : sockets) names += (names.empty() ? "" : ":") + s.name;
    env.push_back("LISTEN_FDS=" + std::to_string(sockets.size()));
    env.push_back("LISTEN_FDNAMES=" + names);
    env.push_back(std::string(ready_env) + "=" + std::to_string(3 + sockets.size()));
    if (with_state) env.push_back(std::string(state_env) + "=" + std::to_string(4 + sockets.size()));
    env.push_back("LISTEN_PID=" + std::string(24, '\0'));
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_value = env.back().data() + std::strlen("LISTEN_PID=");
    argv_text.push_back(binary);
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    for (auto& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (const auto& s : sockets) fds.push_back(s.fd);
  }
};

// One line on the pipe = ready; end of file = the child exited (or closed it) before that. A
// child not ready within `timeout` is killed. Closes `ready_fd`.
UpgradeResult await_child_ready(pid_t pid, int ready_fd, std::chrono::milliseconds timeout) {
  char buf[16];
  pollfd p{ready_fd, POLLIN, 0};
  const int polled = ::poll(&p, 1, static_cast<int>(timeout.count()));
  const auto n = polled > 0 ? ::read(ready_fd, buf, sizeof buf) : 0;
  ::close(ready_fd);
  if (n > 0) return {true, static_cast<long>(pid), ""};
  std::string why;
  if (polled == 0) {
    ::kill(pid, SIGKILL);
    why = "the new process was not ready within " + std::to_string(timeout.count()) + "ms: killed";
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (why.empty()) {
    why = WIFEXITED(status) ? "the new process exited with status " + std::to_string(WEXITSTATUS(status))
                            : "the new process was killed by signal " + std::to_string(WTERMSIG(status));
    why += " before it was ready (its log says why)";
  }
  return {false, 0, why};
}

}  // namespace

UpgradeResult spawn_upgrade(const std::string& binary, const std::vector<std::string>& args,
                            const std::vector<PassedSocket>& sockets, std::string_view state,
                            std::chrono::milliseconds timeout) {
  if (sockets.size() > 60) return {false, 0, "too many listening sockets to pass"};
  if (::access(binary.c_str(), X_OK) != 0)
    return {false, 0, binary + ": " + std::strerror(errno)};
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {false, 0, std::string("pipe: ") + std::strerror(errno)};

  const int state_fd = state_memfd(state);
  ExecImage image(binary, args, sockets, state_fd >= 0);
  const pid_t pid = ::fork();
  if (pid == 0)
    exec_child(binary.c_str(), image.argv.data(), image.envp.data(), image.pid_value, image.fds,
               pipe_fds[1], state_fd);
  ::close(pipe_fds[1]);
  if (state_fd >= 0) ::close(state_fd);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    return {false, 0, std::string("fork: ") + std::strerror(errno)};
  }
  spdlog::info("upgrade: started {} (pid {}) with {} listening socket(s)", binary, pid, sockets.size());
  return await_child_ready(pid, pipe_fds[0], timeout);
}

void report_upgrade_ready() {
  static int fd = [] {
    const char* v = std::getenv(std::string(ready_env).c_str());
    const int parsed = v != nullptr ? std::atoi(v) : -1;
    ::unsetenv(std::string(ready_env).c_str());
    if (parsed > 2) ::fcntl(parsed, F_SETFD, FD_CLOEXEC);
    return parsed > 2 ? parsed : -1;
  }();
  if (fd < 0) return;
  [[maybe_unused]] const auto w = ::write(fd, "ready\n", 6);
  ::close(fd);
  fd = -1;
}

std::optional<std::string> take_upgrade_state() {
  const std::string name(state_env);
  const char* v = std::getenv(name.c_str());
  const int fd = v != nullptr ? std::atoi(v) : -1;
  ::unsetenv(name.c_str());
  if (fd <= 2) return std::nullopt;
  std::string text;
  char buf[16384];
  off_t offset = 0;
  while (true) {
    const auto n = ::pread(fd, buf, sizeof buf, offset);
    if (n < 0) {
      spdlog::warn("upgrade: reading the state the old process handed over: {}; ignored",
                   std::strerror(errno));
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    offset += n;
  }
  ::close(fd);
  return text;
}

std::string own_binary() {
  char path[PATH_MAX];
  const auto n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace sluice
