// One libFuzzer entry point per target: CMake compiles this file once per target with
// SLUICE_FUZZ_ENTRY naming the function in targets/targets.hpp.
#include "targets/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sluice::fuzz::SLUICE_FUZZ_ENTRY(data, size);
  return 0;
}
