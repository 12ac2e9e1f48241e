#include "sluice/config/units.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace sluice::config {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

struct DurationCase {
  std::string_view text;
  Duration expected;
};

TEST(UnitsDuration, ParsesEveryUnitAndFractions) {
  const DurationCase cases[] = {
      {"0s", Duration::zero()},     {"0ms", Duration::zero()}, {"100ms", milliseconds(100)},
      {"250ms", milliseconds(250)}, {"1s", seconds(1)},        {"1.5s", milliseconds(1500)},
      {"0.1s", milliseconds(100)},  {"10s", seconds(10)},      {"5m", minutes(5)},
      {"1.5m", seconds(90)},        {"1h", hours(1)},          {"0.5h", minutes(30)},
      {"007s", seconds(7)},         {"1.000s", seconds(1)},
  };
  for (const auto& c : cases) {
    std::string error;
    const auto parsed = parse_duration(c.text, &error);
    ASSERT_TRUE(parsed.has_value()) << c.text << ": " << error;
    EXPECT_EQ(*parsed, c.expected) << c.text;
  }
}

struct BadCase {
  std::string_view text;
  std::string_view message;
};

TEST(UnitsDuration, RejectsMalformedValuesWithAReason) {
  const BadCase cases[] = {
      {"", "empty duration"},
      {"10", "missing unit in '10'; add one of ms, s, m, h (e.g. \"10s\")"},
      {"1.5", "missing unit in '1.5'; add one of ms, s, m, h (e.g. \"1.5s\")"},
      {"-1s", "negative duration '-1s'"},
      {"10sec", "unknown unit 'sec' (use ms, s, m, h)"},
      {"10S", "unknown unit 'S' (use ms, s, m, h)"},
      {"10d", "unknown unit 'd' (use ms, s, m, h)"},
      {"s", "'s' is not a duration (expected a number and a unit, like \"10s\")"},
      {"+1s", "'+1s' is not a duration (expected a number and a unit, like \"10s\")"},
      {".5s", "'.5s' is not a duration (expected a number and a unit, like \"10s\")"},
      {"1.s", "'1.s' is not a duration (expected a number and a unit, like \"10s\")"},
      {"10 s", "'10 s' must not contain spaces (write it like \"10s\")"},
      {"0.5ms", "'0.5ms' is finer than the 1ms resolution"},
      {"1.0001s", "'1.0001s' is finer than the 1ms resolution"},
      {"1.0000000001s", "too many decimal places in '1.0000000001s'"},
      {"99999999999999999999s", "'99999999999999999999s' is too large"},
      {"9999999999999999h", "'9999999999999999h' is too large"},
  };
  for (const auto& c : cases) {
    std::string error;
    EXPECT_FALSE(parse_duration(c.text, &error).has_value()) << c.text;
    EXPECT_EQ(error, c.message) << c.text;
  }
}

TEST(UnitsDuration, ErrorTextIsOptional) { EXPECT_FALSE(parse_duration("10").has_value()); }

TEST(UnitsSize, ParsesUnitsAndBareByteCounts) {
  const std::pair<std::string_view, std::uint64_t> cases[] = {
      {"0", 0},
      {"512", 512},
      {"512B", 512},
      {"1KiB", KiB},
      {"16KiB", 16 * KiB},
      {"1.5KiB", 1536},
      {"100MiB", 100 * MiB},
      {"1GiB", GiB},
      {"0.5GiB", GiB / 2},
      {"8GiB", 8 * GiB},
      {"0B", 0},
  };
  for (const auto& [text, expected] : cases) {
    std::string error;
    const auto parsed = parse_size(text, &error);
    ASSERT_TRUE(parsed.has_value()) << text << ": " << error;
    EXPECT_EQ(*parsed, expected) << text;
  }
}

TEST(UnitsSize, RejectsMalformedValuesWithAReason) {
  const BadCase cases[] = {
      {"", "empty size"},
      {"-1KiB", "negative size '-1KiB'"},
      {"16KB", "unknown unit 'KB'; did you mean 'KiB'? (use B, KiB, MiB, GiB)"},
      {"16k", "unknown unit 'k'; did you mean 'KiB'? (use B, KiB, MiB, GiB)"},
      {"1mb", "unknown unit 'mb'; did you mean 'MiB'? (use B, KiB, MiB, GiB)"},
      {"1TiB", "unknown unit 'TiB' (use B, KiB, MiB, GiB)"},
      {"KiB", "'KiB' is not a size (expected a number and a unit, like \"16KiB\")"},
      {"1.3B", "'1.3B' is not a whole number of bytes"},
      {"20000000000GiB", "'20000000000GiB' is too large"},
  };
  for (const auto& c : cases) {
    std::string error;
    EXPECT_FALSE(parse_size(c.text, &error).has_value()) << c.text;
    EXPECT_EQ(error, c.message) << c.text;
  }
}

TEST(UnitsHostPort, ParsesNamesIpv4AndBracketedIpv6) {
  struct Case {
    std::string_view text;
    std::string_view host;
    std::uint16_t port;
  };
  const Case cases[] = {
      {"127.0.0.1:8080", "127.0.0.1", 8080},
      {"localhost:1", "localhost", 1},
      {"0.0.0.0:65535", "0.0.0.0", 65535},
      {"[::1]:9001", "::1", 9001},
      {"[::]:80", "::", 80},
      {"[2001:db8::7]:443", "2001:db8::7", 443},
      {"app_1.internal:9001", "app_1.internal", 9001},
      {"[::ffff:10.0.0.1]:80", "::ffff:10.0.0.1", 80},
  };
  for (const auto& c : cases) {
    std::string error;
    const auto parsed = parse_host_port(c.text, false, &error);
    ASSERT_TRUE(parsed.has_value()) << c.text << ": " << error;
    EXPECT_EQ(parsed->host, c.host);
    EXPECT_EQ(parsed->port, c.port);
    // to_string is the inverse for every accepted form.
    EXPECT_EQ(parsed->to_string(), c.text);
  }
}

TEST(UnitsHostPort, PortZeroOnlyWhenAllowed) {
  std::string error;
  EXPECT_FALSE(parse_host_port("127.0.0.1:0", false, &error).has_value());
  EXPECT_EQ(error, "port 0 out of range (1..65535)");
  const auto ephemeral = parse_host_port("127.0.0.1:0", true);
  ASSERT_TRUE(ephemeral.has_value());
  EXPECT_EQ(ephemeral->port, 0);
}

TEST(UnitsHostPort, RejectsMalformedAddressesWithAReason) {
  const BadCase cases[] = {
      {"", "empty address (expected host:port)"},
      {"localhost", "missing port in 'localhost' (expected host:port)"},
      {"localhost:", "missing port in 'localhost:' (expected host:port)"},
      {"[::1]", "missing port in '[::1]' (expected host:port)"},
      {"[::1]:", "missing port in '[::1]:' (expected host:port)"},
      {"::1:9001", "an IPv6 address needs brackets: '[::1]:9001'"},
      {"[::1:9001", "missing ']' in '[::1:9001'"},
      {"[::1]9001", "unexpected '9001' after ']' in '[::1]9001'"},
      {"[nothex]:80", "invalid IPv6 address 'nothex' in '[nothex]:80'"},
      {"[1.2.3.4]:80", "invalid IPv6 address '1.2.3.4' in '[1.2.3.4]:80'"},
      {":8080", "missing host in ':8080' (use 0.0.0.0:8080 for all interfaces)"},
      {"a b:80", "invalid host 'a b' in 'a b:80'"},
      {"host/x:80", "invalid host 'host/x' in 'host/x:80'"},
      {"http://localhost:80", "'http://localhost:80' must be host:port, without a scheme"},
      {"localhost:http", "invalid port 'http' in 'localhost:http' (expected a number 1..65535)"},
      {"localhost:-1", "invalid port '-1' in 'localhost:-1' (expected a number 1..65535)"},
      {"localhost:65536", "port 65536 out of range (1..65535)"},
      {"localhost:99999999999", "port 99999999999 out of range (1..65535)"},
  };
  for (const auto& c : cases) {
    std::string error;
    EXPECT_FALSE(parse_host_port(c.text, false, &error).has_value()) << c.text;
    EXPECT_EQ(error, c.message) << c.text;
  }
}

TEST(UnitsFormat, UsesTheLargestExactUnit) {
  EXPECT_EQ(format_duration(Duration::zero()), "0s");
  EXPECT_EQ(format_duration(milliseconds(250)), "250ms");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(format_duration(seconds(90)), "90s");
  EXPECT_EQ(format_duration(minutes(5)), "5m");
  EXPECT_EQ(format_duration(hours(24)), "24h");
  EXPECT_EQ(format_size(0), "0B");
  EXPECT_EQ(format_size(1000), "1000B");
  EXPECT_EQ(format_size(16 * KiB), "16KiB");
  EXPECT_EQ(format_size(1536), "1536B");
  EXPECT_EQ(format_size(100 * MiB), "100MiB");
  EXPECT_EQ(format_size(2 * GiB), "2GiB");
}

TEST(UnitsFormat, RoundTripsThroughTheParsers) {
  for (const auto text : {"250ms", "10s", "5m", "1h"}) {
    EXPECT_EQ(format_duration(*parse_duration(text)), text);
  }
  for (const auto text : {"512B", "16KiB", "100MiB", "1GiB"}) {
    EXPECT_EQ(format_size(*parse_size(text)), text);
  }
}

}  // namespace
}  // namespace sluice::config
