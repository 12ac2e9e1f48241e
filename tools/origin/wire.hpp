#pragma once
// Byte-level pieces of responses: status lines, numbers and the verifiable body pattern.
// Appending to a caller-owned std::string lets a connection keep one output buffer for its life.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::origin {

// Response bodies asked for with `size=N` repeat these 16 bytes from offset 0, so a client can
// check any byte: body[i] == body_pattern[i % 16].
inline constexpr std::string_view body_pattern = "0123456789abcdef";

// Largest single write of pattern bytes (and the chunk size of chunked pattern bodies).
// A multiple of the pattern period, so every slice starts at pattern offset 0.
inline constexpr std::size_t pattern_slice_max = 256 * 1024;

// The first n (<= pattern_slice_max) pattern bytes; static storage shared by every connection.
std::string_view pattern_slice(std::size_t n);

void append_decimal(std::string& out, std::uint64_t v);
void append_hex(std::string& out, std::uint64_t v);
// "HTTP/1.1 <code> <reason>\r\n"
void append_status_line(std::string& out, unsigned status);

}  // namespace sluice::origin
