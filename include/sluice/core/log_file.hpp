#pragma once
// Log files ([log] access_file, error_file): opened for appending, created when absent, and
// checked by the config loader before anything opens them. Control plane only.
#include <string>

namespace sluice {

// Opens `path` for appending (O_APPEND: lines from one write() never interleave with another
// writer's), creating it with mode 0644 when absent. Returns the descriptor, or -errno.
int open_log_file(const std::string& path);

// Why `path` could not be opened for appending, without creating it ("directory /x does not
// exist", "'/x' is a directory", "permission denied"), or "" when it could.
std::string log_file_problem(const std::string& path);

}  // namespace sluice
