#include "sluice/http/date.hpp"

#include <ctime>

namespace sluice::http {

namespace {

void put2(char* at, unsigned n) noexcept {
  at[0] = static_cast<char>('0' + n / 10 % 10);
  at[1] = static_cast<char>('0' + n % 10);
}

}  // namespace

void format_imf_fixdate(std::int64_t unix_seconds, char (&out)[imf_fixdate_size]) noexcept {
  // strftime's %a and %b follow the locale; the field's names are fixed English ones.
  static constexpr char days[] = "SunMonTueWedThuFriSat";
  static constexpr char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  const auto day = static_cast<unsigned>(tm.tm_wday) * 3;
  const auto month = static_cast<unsigned>(tm.tm_mon) * 3;
  const auto year = static_cast<unsigned>(tm.tm_year + 1900);
  char* p = out;
  p[0] = days[day], p[1] = days[day + 1], p[2] = days[day + 2], p[3] = ',', p[4] = ' ';
  put2(p + 5, static_cast<unsigned>(tm.tm_mday));
  p[7] = ' ';
  p[8] = months[month], p[9] = months[month + 1], p[10] = months[month + 2], p[11] = ' ';
  put2(p + 12, year / 100);
  put2(p + 14, year % 100);
  p[16] = ' ';
  put2(p + 17, static_cast<unsigned>(tm.tm_hour));
  p[19] = ':';
  put2(p + 20, static_cast<unsigned>(tm.tm_min));
  p[22] = ':';
  put2(p + 23, static_cast<unsigned>(tm.tm_sec));
  p[25] = ' ', p[26] = 'G', p[27] = 'M', p[28] = 'T';
}

std::string_view HttpDate::at(std::int64_t unix_seconds) noexcept {
  if (unix_seconds != second_) {
    format_imf_fixdate(unix_seconds, text_);
    second_ = unix_seconds;
  }
  return {text_, imf_fixdate_size};
}

std::string_view HttpDate::now() noexcept {
  // The coarse clock is read from the vDSO without a system call; a tick (1-4 ms) is far finer
  // than the field's one second.
  timespec ts{};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return at(ts.tv_sec);
}

}  // namespace sluice::http
