#pragma once
// Passive checks: what one live request to a server ended with, and `fail_on`, the upstream's
// list of outcomes that count against the server:
//   fail_on = ["connect", "timeout", "reset", "502", "503", "504"]      (the default)
// Items: "connect" (could not connect: refused, timed out, unreachable), "refused" (the
// connection was refused), "timeout" (no response in time), "reset" (the connection broke
// mid-exchange), and statuses as in expect_status: codes, ranges, classes ("500-599", "5xx").
// Anything not listed counts as a success. `[retry] on` takes the same items (parse_failure_item).
//
// The proxy classifies each attempt into a LiveResult, asks its upstream's FailOn whether it
// counts, and reports ServerHealth::live_failure() or live_success(). Immutable after parsing:
// counts() is safe from any thread.
//
// In config/, the layer below health/, because Config holds a FailOn; the namespace stays
// health's, whose vocabulary it is (docs/architecture.md, Layers).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sluice/config/expect_status.hpp"

namespace sluice::health {

struct LiveResult {
  enum class Kind : std::uint8_t { response, connect, timeout, reset };

  Kind kind = Kind::response;
  unsigned status = 0;  // for Kind::response
  // Optional finer wording for reason strings ("connect refused"); must point at static storage.
  std::string_view detail{};

  static LiveResult response(unsigned status) noexcept { return {Kind::response, status, {}}; }
  static LiveResult connect_failure(std::string_view detail = {}) noexcept {
    return {Kind::connect, 0, detail};
  }
  static LiveResult timeout(std::string_view detail = {}) noexcept {
    return {Kind::timeout, 0, detail};
  }
  static LiveResult reset(std::string_view detail = {}) noexcept { return {Kind::reset, 0, detail}; }
};

// For reason strings: the detail if any, else "connect", "timeout", "reset" or the status ("502").
std::string describe(const LiveResult& result);

// One item of `passive.fail_on` or `retry.on`: a failure word, or statuses. nullopt (and *why) on
// anything else, so that both keys accept and refuse the same words.
struct FailureItem {
  enum class Word : std::uint8_t { none, connect, refused, reset, timeout };
  Word word = Word::none;
  StatusMatcher statuses;  // when word is none
};
std::optional<FailureItem> parse_failure_item(std::string_view item, std::string* why = nullptr);

class FailOn {
public:
  static std::optional<FailOn> parse(std::span<const std::string> items, std::string* error = nullptr);
  // Items known to be valid (a built-in default, config::defaults::fail_on).
  static FailOn of(std::span<const std::string_view> items);

  bool counts(const LiveResult& result) const noexcept;
  std::string to_string() const;  // "connect,timeout,reset,502-504"

private:
  void add(const FailureItem& item);
  bool connect_ = false;
  bool refused_ = false;
  bool timeout_ = false;
  bool reset_ = false;
  StatusMatcher statuses_;
};

}  // namespace sluice::health
