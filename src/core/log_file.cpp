#include "sluice/core/log_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

namespace sluice {

int open_log_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  return fd >= 0 ? fd : -errno;
}

std::string log_file_problem(const std::string& path) {
  if (path.empty()) return "must not be empty; remove the key to log to the standard stream";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return "'" + path + "' is a directory";
    if (::access(path.c_str(), W_OK) != 0)
      return "cannot write '" + path + "': " + std::system_category().message(errno);
    return "";
  }
  if (errno != ENOENT) return "cannot use '" + path + "': " + std::system_category().message(errno);
  // Absent: created at start, so its directory must exist and take new files.
  auto dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return "directory '" + dir.string() + "' does not exist";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "cannot create '" + path + "' in '" + dir.string() + "': " +
           std::system_category().message(errno);
  return "";
}

}  // namespace sluice
