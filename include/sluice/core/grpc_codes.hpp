#pragma once
// gRPC's status codes (grpc/grpc doc/statuscodes.md), for the proxy's metrics, the gRPC health
// probes' reasons and retry.on's "grpc:NAME" items.
#include <cstddef>
#include <iterator>
#include <string_view>

namespace sluice {

// By value, 0..16, then OTHER: the label values of sluice_grpc_responses_total.
inline constexpr std::string_view grpc_code_names[] = {
    "OK",        "CANCELLED",          "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
    "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED", "OTHER"};

// A grpc-status value's index in grpc_code_names: its code, or OTHER's for anything but 0..16.
constexpr std::size_t grpc_code_slot(std::string_view grpc_status) noexcept {
  constexpr std::size_t other = std::size(grpc_code_names) - 1;
  if (grpc_status.empty() || grpc_status.size() > 2 || (grpc_status.size() == 2 && grpc_status[0] == '0'))
    return other;
  std::size_t code = 0;
  for (const char c : grpc_status) {
    if (c < '0' || c > '9') return other;
    code = code * 10 + static_cast<std::size_t>(c - '0');
  }
  return code < other ? code : other;
}

// A code by its name in any case ("unavailable"), 0..16; grpc_code_count for none.
inline constexpr std::size_t grpc_code_count = std::size(grpc_code_names) - 1;
constexpr std::size_t grpc_code_of_name(std::string_view name) noexcept {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (std::size_t code = 0; code < grpc_code_count; ++code) {
    const auto known = grpc_code_names[code];
    if (known.size() != name.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < name.size() && same; ++i) same = lower(known[i]) == lower(name[i]);
    if (same) return code;
  }
  return grpc_code_count;
}

}  // namespace sluice
