#pragma once
// Shared by the config tests: load a snippet as "test.toml", and read its errors as the strings
// the user sees ("FILE:LINE:COL: key.path: message"), so that one string asserts all five fields.
#include <string>
#include <string_view>
#include <vector>

#include "sluice/config/loader.hpp"

namespace sluice::config::testing {

using Errors = std::vector<std::string>;

// Appended to snippets that test something else, so that they have the one upstream a config
// needs. It goes last so that it does not move the line numbers asserted above it.
inline constexpr std::string_view one_upstream = R"(
[upstreams.app]
[[upstreams.app.servers]]
address = "127.0.0.1:9001"
)";

inline LoadResult load(std::string_view text) { return load_string(text, "test.toml"); }

inline LoadResult load_with_upstream(std::string_view text) {
  return load(std::string(text) + std::string(one_upstream));
}

inline Errors errors_of(const LoadResult& result) {
  Errors out;
  for (const auto& error : result.errors) out.push_back(error.to_string());
  return out;
}

}  // namespace sluice::config::testing
