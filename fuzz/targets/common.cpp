#include <cstdio>
#include <cstdlib>

#include "targets/targets.hpp"

namespace sluice::fuzz {

namespace {
bool throw_instead = false;
}

void throw_on_failure(bool enable) { throw_instead = enable; }

void fail(std::string_view what, std::string_view detail) {
  std::string message = "fuzz invariant broken: ";
  message.append(what);
  if (!detail.empty()) message.append(" [").append(detail).append("]");
  if (throw_instead) throw InvariantBroken(message);
  std::fprintf(stderr, "%s\n", message.c_str());
  std::abort();
}

}  // namespace sluice::fuzz
