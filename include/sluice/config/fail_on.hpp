#pragma once
// Passive checks: what one live request to a server ended with, and `fail_on`, the upstream's
// list of outcomes that count against the server:
//   fail_on = ["connect", "timeout", "reset", "502", "503", "504"]      (the default)
// Items: "connect" (could not connect: refused, timed out, unreachable), "refused" (the
// connection was refused), "timeout" (no response in time), "reset" (the connection broke
// mid-exchange), and statuses as in expect_status: codes, ranges, classes ("500-599", "5xx").
// Anything not listed counts as a success. `[retry] on` takes the same items (parse_failure_item).
//
// The proxy asks its upstream's FailOn whether an attempt's Failure counts (failure.hpp names the
// kinds each word covers, for `retry.on` too), and reports ServerHealth::live_failure() or
// live_success(). Immutable after parsing: counts() is safe from any thread.
//
// In config/, the layer below health/, because Config holds a FailOn; the namespace stays
// health's, whose vocabulary it is (docs/architecture.md, Layers).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sluice/config/expect_status.hpp"
#include "sluice/config/failure.hpp"

namespace sluice::health {

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

  // An answer counts when its status is listed; a failure when a listed word names its kind.
  bool counts(const Failure& f) const noexcept;
  std::string to_string() const;  // "connect,timeout,reset,502-504"

private:
  void add(const FailureItem& item);
  FailureWords words_;
  StatusMatcher statuses_;
};

}  // namespace sluice::health
