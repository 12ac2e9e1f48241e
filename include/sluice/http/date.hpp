#pragma once
// The Date field sluice writes: RFC 9110 §6.6.1 asks a recipient with a clock to add one to a
// response it forwards without (and an origin server to send one on its own 2xx-4xx answers).
// HttpDate keeps the current second's IMF-fixdate and formats it again only when the second
// changes, so a response pays one coarse clock read and a copy, never a format or an allocation.
// One per worker: touched only by that worker's thread.
#include <cstdint>
#include <string_view>

namespace sluice::http {

// "Sun, 06 Nov 1994 08:49:37 GMT" (RFC 9110 §5.6.7).
inline constexpr std::size_t imf_fixdate_size = 29;

// `unix_seconds` (UTC) as an IMF-fixdate into `out`; locale-independent.
void format_imf_fixdate(std::int64_t unix_seconds, char (&out)[imf_fixdate_size]) noexcept;

class HttpDate {
public:
  // The IMF-fixdate of the wall clock's current second (CLOCK_REALTIME_COARSE).
  std::string_view now() noexcept;
  // The IMF-fixdate of `unix_seconds`, formatted only when it differs from the last one asked.
  std::string_view at(std::int64_t unix_seconds) noexcept;

private:
  std::int64_t second_ = -1;
  char text_[imf_fixdate_size];
};

}  // namespace sluice::http
