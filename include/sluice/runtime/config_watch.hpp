#pragma once
// `[server] watch_config = true`: reloads when the config file changes. Watches the file's
// directory with inotify (editors and config-map updates replace the file by rename, which a watch
// on the file itself would miss) and debounces a burst of events into one reload. Control thread.
#include <filesystem>
#include <functional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

namespace sluice {

class ConfigWatch {
public:
  ConfigWatch(boost::asio::io_context& control, const std::string& path, std::function<void()> on_change);
  ~ConfigWatch();
  ConfigWatch(const ConfigWatch&) = delete;
  ConfigWatch& operator=(const ConfigWatch&) = delete;

  void stop();

private:
  void read();

  std::string file_name_;
  boost::asio::posix::stream_descriptor inotify_;
  boost::asio::steady_timer debounce_;
  std::function<void()> on_change_;
  alignas(8) char buffer_[4096];
};

}  // namespace sluice
