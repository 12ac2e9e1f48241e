#pragma once
// Helpers shared by the HTTP targets.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/core/arena.hpp"
#include "sluice/http/message.hpp"
#include "targets/targets.hpp"

namespace sluice::fuzz {

using Lines = std::vector<std::pair<std::string, std::string>>;

inline Lines lines_of(const http::Fields& fields) {
  Lines out;
  for (const auto& f : fields) out.emplace_back(std::string(f.name_string()), std::string(f.value()));
  return out;
}

inline std::string show(const Lines& lines) {
  std::string s;
  for (const auto& [n, v] : lines) s.append(n).append(": ").append(v).append("\\r\\n");
  return s;
}

// A request-sized arena, as the session borrows from its worker's pool for one exchange.
class ExchangeArena {
public:
  ExchangeArena() { arena_.attach(block_, sizeof block_); }
  Arena* get() { return &arena_; }
  void reset() { arena_.reset(); }

private:
  alignas(16) char block_[32 * 1024];
  Arena arena_;
};

}  // namespace sluice::fuzz
