#pragma once
// `expect_status` for probes (and the status part of `fail_on`): a set of HTTP status codes written
// as a comma-separated list of codes, ranges and classes:
//   "200-399"            "200,204,300-399"           "2xx,304"
// Codes are three digits in 100-599; a range's low end may not exceed its high end; spaces around
// items are allowed; empty items ("200,,204", "200,") are errors. parse() reports the first error
// with the offending item quoted, e.g. `bad status range '399-200': 399 is above 200`.
//
// Immutable after parsing; match() is a bit test, safe from any thread.
//
// In config/, the layer below health/, because Config holds a StatusMatcher; the namespace stays
// health's, whose vocabulary it is (docs/architecture.md, Layers).
#include <bitset>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::health {

class StatusMatcher {
public:
  // nullopt on bad syntax; *error (if given) says why.
  static std::optional<StatusMatcher> parse(std::string_view text, std::string* error = nullptr);

  bool match(unsigned status) const noexcept { return status < bits_.size() && bits_[status]; }
  bool empty() const noexcept { return bits_.none(); }
  // Canonical form: sorted, merged ranges ("200-299,304").
  std::string to_string() const;

  // Adds the codes of `other` (for fail_on, which collects several items).
  void merge(const StatusMatcher& other) noexcept { bits_ |= other.bits_; }

private:
  std::bitset<600> bits_;
};

// The default `expect_status`: any 2xx or 3xx.
StatusMatcher default_expect_status();

}  // namespace sluice::health
