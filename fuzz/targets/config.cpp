// (c) config_text: TOML text -> validated Config or a list of errors, never a crash, never both,
// never neither; every error names FILE:LINE:COL (what `sluice check` and reload print).
#include <string>

#include "sluice/config/loader.hpp"
#include "targets/targets.hpp"

namespace sluice::fuzz {

void config_text(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto result = config::load_string(text, "fuzz.toml");
  if (result.ok()) {
    check(result.errors.empty(), "a config and errors");
    const auto& c = *result.config;
    check(!c.upstreams.empty(), "a valid config without upstreams");
    check(!c.server.listen.empty(), "a valid config without a listen address");
    check(c.server.max_uri_bytes <= c.server.max_header_bytes, "URI limit above the head limit");
    (void)config::summary(c);
    return;
  }
  check(!result.errors.empty(), "neither a config nor errors");
  for (const auto& e : result.errors) {
    const auto line = e.to_string();
    check(e.line >= 1 && e.column >= 1, "error without a position", line);
    check(!e.message.empty(), "error without a message", line);
    const auto prefix = "fuzz.toml:" + std::to_string(e.line) + ":" + std::to_string(e.column) + ": ";
    check(line.starts_with(prefix), "error does not start with FILE:LINE:COL", line);
  }
}

}  // namespace sluice::fuzz
