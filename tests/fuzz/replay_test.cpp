// Replays every checked-in fuzz input (fuzz/corpus/<target>/ and fuzz/regressions/<target>/)
// through its target, so a crash the fuzzer once found, or a seed that stops passing, fails the
// unit tests in every build (and under ASan+UBSan in the sanitizer build), not only when fuzzing.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "targets/targets.hpp"

namespace {

namespace fs = std::filesystem;
using Target = void (*)(const std::uint8_t*, std::size_t);

std::vector<fs::path> inputs_of(const std::string& target) {
  std::vector<fs::path> files;
  for (const auto* dir : {"corpus", "regressions"}) {
    const fs::path root = fs::path(SLUICE_FUZZ_DIR) / dir / target;
    if (!fs::is_directory(root)) continue;
    for (const auto& entry : fs::directory_iterator(root))
      if (entry.is_regular_file() && entry.path().filename().string()[0] != '.')
        files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

void replay(const std::string& target, Target run, std::size_t at_least) {
  sluice::fuzz::throw_on_failure(true);
  const auto files = inputs_of(target);
  EXPECT_GE(files.size(), at_least) << "seed corpus of " << target << " missing";
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    // An abort (a sanitizer, a failed assertion in Beast) ends the process without a test
    // failure message: SLUICE_FUZZ_REPLAY_VERBOSE=1 names each input first.
    if (std::getenv("SLUICE_FUZZ_REPLAY_VERBOSE") != nullptr) std::fprintf(stderr, "replay %s\n", file.c_str());
    try {
      run(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    } catch (const sluice::fuzz::InvariantBroken& e) {
      ADD_FAILURE() << file << ": " << e.what();
    }
  }
  sluice::fuzz::throw_on_failure(false);
}

TEST(FuzzReplay, Request) { replay("request", sluice::fuzz::request_stream, 20); }
TEST(FuzzReplay, Response) { replay("response", sluice::fuzz::response_stream, 10); }
TEST(FuzzReplay, Config) { replay("config", sluice::fuzz::config_text, 2); }
TEST(FuzzReplay, Chunked) { replay("chunked", sluice::fuzz::chunked_body, 5); }
// The head index against today's head path, on the request and response inputs (their own
// corpora, fuzz/corpus/head_request and head_response, hold what the fuzzer found for them).
TEST(FuzzReplay, HeadIndexRequest) {
  replay("request", sluice::fuzz::head_index_request, 20);
  replay("head_request", sluice::fuzz::head_index_request, 0);
}
TEST(FuzzReplay, HeadIndexResponse) {
  replay("response", sluice::fuzz::head_index_response, 10);
  replay("head_response", sluice::fuzz::head_index_response, 0);
}
TEST(FuzzReplay, Http2ClientBytes) { replay("h2", sluice::fuzz::h2_client_bytes, 10); }

}  // namespace
