#include "sluice/runtime/config_watch.hpp"

#include <sys/inotify.h>

#include <cstring>
#include <stdexcept>

#include <spdlog/spdlog.h>

namespace sluice {

namespace fs = std::filesystem;

ConfigWatch::ConfigWatch(boost::asio::io_context& control, const std::string& path,
                         std::function<void()> on_change)
    : file_name_(fs::path(path).filename().string()),
      inotify_(control),
      debounce_(control),
      on_change_(std::move(on_change)) {
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("inotify: ") + std::strerror(errno));
  inotify_.assign(fd);
  auto dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (::inotify_add_watch(fd, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) < 0)
    throw std::runtime_error("inotify: cannot watch " + dir.string() + ": " + std::strerror(errno));
  read();
}

ConfigWatch::~ConfigWatch() { stop(); }

void ConfigWatch::stop() {
  boost::system::error_code ignored;
  debounce_.cancel();
  inotify_.close(ignored);
}

void ConfigWatch::read() {
  inotify_.async_read_some(boost::asio::buffer(buffer_), [this](boost::system::error_code ec, std::size_t n) {
    if (ec) return;  // closed at shutdown
    bool ours = false;
    for (std::size_t at = 0; at + sizeof(inotify_event) <= n;) {
      inotify_event event;
      std::memcpy(&event, buffer_ + at, sizeof event);
      const char* name = buffer_ + at + sizeof(inotify_event);
      if (event.len != 0 && file_name_ == name) ours = true;
      at += sizeof(inotify_event) + event.len;
    }
    if (ours) {
      // An editor writes, renames and touches in a burst: reload once, when it is over.
      debounce_.expires_after(std::chrono::milliseconds(200));
      debounce_.async_wait([this](boost::system::error_code e) {
        if (!e) {
          spdlog::info("config file changed: reloading");
          on_change_();
        }
      });
    }
    read();
  });
}

}  // namespace sluice
