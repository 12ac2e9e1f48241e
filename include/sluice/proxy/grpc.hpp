#pragma once
// gRPC's view of sluice's own answers (docs/grpc.md): a gRPC client reads the call's outcome from
// the grpc-status and grpc-message fields of an HTTP 200 answer, not from the HTTP status, so an
// answer sluice writes for such a client says it there.
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "sluice/core/grpc_codes.hpp"

namespace sluice::proxy {

// A request is a gRPC call when its content-type is application/grpc or application/grpc+FORMAT
// (also ;parameters).
bool is_grpc_content_type(std::string_view content_type) noexcept;

// The gRPC status code (as its decimal text) for an answer sluice gives with HTTP `status`:
// UNAVAILABLE (14) for no server, a failed connection, 502 and 503; DEADLINE_EXCEEDED (4) for a
// timeout (504, 408); RESOURCE_EXHAUSTED (8) for a rate limit (429) or a request over a size
// limit (413, 414, 431); UNIMPLEMENTED (12) for no route (404) or a method not offered (501,
// 405); PERMISSION_DENIED (7) for 403; UNAUTHENTICATED (16) for 401; INTERNAL (13) for a
// malformed request (400); UNKNOWN (2) for anything else.
std::string_view grpc_status_for(unsigned http_status) noexcept;

// `text` percent-encoded for grpc-message (every byte outside 0x20-0x7E, and '%'), into `out`;
// cut short (never mid-escape) where `out` is full. Returns what was written.
std::string_view grpc_message(std::string_view text, std::span<char> out) noexcept;

// A grpc-timeout value (1 to 8 digits and a unit: H, M, S, m, u, n), or nullopt when malformed.
std::optional<std::chrono::nanoseconds> grpc_timeout(std::string_view value) noexcept;

}  // namespace sluice::proxy
