#include "sluice/core/file.hpp"

#include <cerrno>
#include <cstdio>

namespace sluice {

int read_whole_file(const std::string& path, std::string& text) {
  text.clear();
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return errno;
  char buffer[16384];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  const int read_error = std::ferror(file) ? errno : 0;
  std::fclose(file);
  return read_error;
}

}  // namespace sluice
