#pragma once
// Durations ("250ms", "10s", "5m", "1h", "1.5s") and sizes ("512B", "16KiB", "100MiB", "1GiB").
// Pure functions; used by the config loader and by the CLI (`--timeout 60s`).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/config/config.hpp"

namespace sluice::config {

// nullopt on a malformed value; *error (if given) says why, e.g. "unknown unit 'sec' (use ms, s, m, h)".
std::optional<Duration> parse_duration(std::string_view text, std::string* error = nullptr);
std::optional<std::uint64_t> parse_size(std::string_view text, std::string* error = nullptr);
// "host:port" / "[v6]:port"; port 1..65535 (0 allowed only when allow_zero_port).
std::optional<HostPort> parse_host_port(std::string_view text, bool allow_zero_port, std::string* error = nullptr);

// The inverse of the parsers, in the largest unit that is exact: 90000ms -> "90s", 1500ms ->
// "1500ms", 16384 -> "16KiB", 1000 -> "1000B". Error messages and `sluice check` quote values
// in the same form the user writes them.
std::string format_duration(Duration duration);
std::string format_size(std::uint64_t bytes);

}  // namespace sluice::config
