#include "sluice/core/clock.hpp"

namespace sluice {

const Clock& steady_clock() {
  static const SteadyClock clock;
  return clock;
}

}  // namespace sluice
