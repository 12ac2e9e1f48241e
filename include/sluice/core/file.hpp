#pragma once
// Reading a whole (small) file: configs, certificates, keys, token files. Control plane only.
#include <string>

namespace sluice {

// The file's bytes into `text` (replaced). Returns 0, or the errno of the failed open or read
// (a directory opens and fails on the first read: EISDIR).
int read_whole_file(const std::string& path, std::string& text);

}  // namespace sluice
