#pragma once
// TOML text -> validated Config. Control plane only (start-up, `sluice check`, reload): may
// allocate and throw internally, but reports problems as a list of ConfigError, never by
// throwing to the caller. Every error is collected: the user sees all of them at once.
#include <string>
#include <string_view>
#include <vector>

#include "sluice/config/config.hpp"

namespace sluice::config {

struct ConfigError {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key_path;  // e.g. "upstreams.app.servers[1].weight"; "" when not about one key
  std::string message;

  // "FILE:LINE:COL: key.path: message" (the key part omitted when key_path is empty; LINE:COL
  // omitted when line is 0, i.e. the error is about the whole file, such as "cannot read")
  std::string to_string() const;
};

struct LoadResult {
  std::optional<Config> config;  // set iff errors is empty
  std::vector<ConfigError> errors;
  // Accepted, but worth a word: keys with no effect under the chosen policy, deprecated keys.
  std::vector<ConfigError> warnings;

  bool ok() const { return config.has_value(); }
};

LoadResult load_file(const std::string& path);
// `source` names the text in error messages (a file name, or "<string>").
LoadResult load_string(std::string_view toml_text, std::string_view source);

// One line for `sluice check`: "conf/sluice.toml: ok: 1 listener, 1 upstream, 3 servers, 0 routes"
std::string summary(const Config& config);

}  // namespace sluice::config
