#include "sluice/config/units.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <span>

namespace sluice::config {

namespace {

struct Unit {
  std::string_view name;
  std::uint64_t factor;
};

constexpr std::array<Unit, 4> duration_units{
    {{"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}}};
constexpr std::array<Unit, 4> size_units{{{"B", 1}, {"KiB", KiB}, {"MiB", MiB}, {"GiB", GiB}}};

// More decimals than this cannot matter for ms or bytes, and the cap keeps the arithmetic in
// scale() inside 64 bits: 10^9 * 2^30 < 2^64.
constexpr int max_fraction_digits = 9;

bool fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

// "1.5KiB" = whole 1, fraction 5, fraction_scale 10, unit "KiB". Integers, not a double, so that
// "0.1s" is exactly 100ms and a value that does not land on a whole unit is detected, not rounded.
struct Quantity {
  std::uint64_t whole = 0;
  std::uint64_t fraction = 0;
  std::uint64_t fraction_scale = 1;
  std::string_view unit;
};

// Both parsers share one grammar: digits, optionally '.' and digits, then a unit (maybe empty).
bool split_quantity(std::string_view text, std::string_view what, std::string_view example,
                    Quantity& out, std::string* error) {
  if (text.empty()) return fail(error, "empty " + std::string(what));
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      return fail(error, quoted(text) + " must not contain spaces (write it like \"" +
                             std::string(example) + "\")");
    }
  }
  if (text.front() == '-') return fail(error, "negative " + std::string(what) + " " + quoted(text));

  const auto not_a_number = [&] {
    return fail(error, quoted(text) + " is not a " + std::string(what) +
                           " (expected a number and a unit, like \"" + std::string(example) +
                           "\")");
  };
  const auto too_large = [&] { return fail(error, quoted(text) + " is too large"); };

  std::size_t i = 0;
  const auto digits = [&](std::uint64_t& value, int& count) {
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++count) {
      const std::uint64_t digit = text[i] - '0';
      if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return false;
      value = value * 10 + digit;
    }
    return true;
  };

  int whole_digits = 0;
  if (!digits(out.whole, whole_digits)) return too_large();
  if (whole_digits == 0) return not_a_number();
  if (i < text.size() && text[i] == '.') {
    ++i;
    int fraction_digits = 0;
    if (!digits(out.fraction, fraction_digits)) return too_large();
    if (fraction_digits == 0) return not_a_number();
    if (fraction_digits > max_fraction_digits) {
      return fail(error, "too many decimal places in " + quoted(text));
    }
    for (int d = 0; d < fraction_digits; ++d) out.fraction_scale *= 10;
  }
  out.unit = text.substr(i);
  return true;
}

enum class Scaled { ok, overflow, inexact };

// quantity * factor as a whole number; `inexact` when the fraction leaves a remainder.
Scaled scale(const Quantity& q, std::uint64_t factor, std::uint64_t limit, std::uint64_t& out) {
  if (q.whole > limit / factor) return Scaled::overflow;
  const std::uint64_t fraction_units = q.fraction * factor;  // < 10^9 * 2^30: no overflow
  if (fraction_units % q.fraction_scale != 0) return Scaled::inexact;
  const std::uint64_t whole_units = q.whole * factor;
  const std::uint64_t extra = fraction_units / q.fraction_scale;
  if (whole_units > limit - extra) return Scaled::overflow;
  out = whole_units + extra;
  return Scaled::ok;
}

const Unit* find_unit(std::span<const Unit> units, std::string_view name) {
  for (const auto& unit : units) {
    if (unit.name == name) return &unit;
  }
  return nullptr;
}

// "KB", "mb", "kib", "G": the user meant a binary unit; say which one.
std::string size_unit_hint(std::string_view unit) {
  if (unit.empty() || unit.size() > 3) return {};
  switch (std::tolower(static_cast<unsigned char>(unit.front()))) {
    case 'k': return "; did you mean 'KiB'?";
    case 'm': return "; did you mean 'MiB'?";
    case 'g': return "; did you mean 'GiB'?";
    case 'b': return "; did you mean 'B'?";
    default: return {};
  }
}

// Largest unit that represents `value` exactly; units are ordered smallest first.
std::string format_in(std::span<const Unit> units, std::uint64_t value, std::string_view zero) {
  if (value == 0) return std::string(zero);
  for (auto it = units.rbegin(); it != units.rend(); ++it) {
    if (value % it->factor == 0) return std::to_string(value / it->factor) + std::string(it->name);
  }
  return std::to_string(value) + std::string(units.front().name);
}

bool valid_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

bool valid_ipv6_char(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
}

}  // namespace

std::optional<Duration> parse_duration(std::string_view text, std::string* error) {
  Quantity q;
  if (!split_quantity(text, "duration", "10s", q, error)) return std::nullopt;
  if (q.unit.empty()) {
    fail(error, "missing unit in " + quoted(text) + "; add one of ms, s, m, h (e.g. \"" +
                    std::string(text) + "s\")");
    return std::nullopt;
  }
  const Unit* unit = find_unit(duration_units, q.unit);
  if (unit == nullptr) {
    fail(error, "unknown unit " + quoted(q.unit) + " (use ms, s, m, h)");
    return std::nullopt;
  }
  std::uint64_t ms = 0;
  const auto limit = static_cast<std::uint64_t>(std::numeric_limits<Duration::rep>::max());
  switch (scale(q, unit->factor, limit, ms)) {
    case Scaled::ok: return Duration(static_cast<Duration::rep>(ms));
    case Scaled::overflow: fail(error, quoted(text) + " is too large"); break;
    case Scaled::inexact: fail(error, quoted(text) + " is finer than the 1ms resolution"); break;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> parse_size(std::string_view text, std::string* error) {
  Quantity q;
  if (!split_quantity(text, "size", "16KiB", q, error)) return std::nullopt;
  // A bare number is a byte count, the same as a TOML integer would be.
  const Unit* unit = q.unit.empty() ? &size_units.front() : find_unit(size_units, q.unit);
  if (unit == nullptr) {
    fail(error,
         "unknown unit " + quoted(q.unit) + size_unit_hint(q.unit) + " (use B, KiB, MiB, GiB)");
    return std::nullopt;
  }
  std::uint64_t bytes = 0;
  switch (scale(q, unit->factor, std::numeric_limits<std::uint64_t>::max(), bytes)) {
    case Scaled::ok: return bytes;
    case Scaled::overflow: fail(error, quoted(text) + " is too large"); break;
    case Scaled::inexact: fail(error, quoted(text) + " is not a whole number of bytes"); break;
  }
  return std::nullopt;
}

namespace {

// The host and port texts of "host:port", "[v6]:port" or either without its port (`port` empty
// and false returned for "missing port"); nullopt after an error.
struct HostPortText {
  std::string_view host;
  std::string_view port;
};

std::optional<HostPortText> split_bracketed(std::string_view text, std::string* error) {
  const auto close = text.find(']');
  if (close == std::string_view::npos) {
    fail(error, "missing ']' in " + quoted(text));
    return std::nullopt;
  }
  const auto host = text.substr(1, close - 1);
  const auto rest = text.substr(close + 1);
  if (!rest.empty() && rest.front() != ':') {
    fail(error, "unexpected " + quoted(rest) + " after ']' in " + quoted(text));
    return std::nullopt;
  }
  bool valid = host.find(':') != std::string_view::npos;
  for (const char c : host) valid = valid && valid_ipv6_char(c);
  if (!valid) {
    fail(error, "invalid IPv6 address " + quoted(host) + " in " + quoted(text));
    return std::nullopt;
  }
  return HostPortText{host, rest.empty() ? rest : rest.substr(1)};
}

std::optional<HostPortText> split_plain(std::string_view text, std::string* error) {
  const auto colon = text.rfind(':');
  const bool has_port = colon != std::string_view::npos;
  const auto host = has_port ? text.substr(0, colon) : text;
  const auto port = has_port ? text.substr(colon + 1) : std::string_view();
  if (host.find(':') != std::string_view::npos) {
    fail(error, "an IPv6 address needs brackets: '[" + std::string(host) + "]:" + std::string(port) + "'");
    return std::nullopt;
  }
  if (host.empty()) {
    fail(error, "missing host in " + quoted(text) + " (use 0.0.0.0" + std::string(text) +
                    " for all interfaces)");
    return std::nullopt;
  }
  for (const char c : host) {
    if (!valid_name_char(c)) {
      fail(error, "invalid host " + quoted(host) + " in " + quoted(text));
      return std::nullopt;
    }
  }
  return HostPortText{host, port};
}

std::optional<std::uint16_t> parse_port(std::string_view port_text, std::string_view text,
                                        bool allow_zero_port, std::string* error) {
  if (port_text.empty()) {
    fail(error, "missing port in " + quoted(text) + " (expected host:port)");
    return std::nullopt;
  }
  const std::uint32_t min_port = allow_zero_port ? 0 : 1;
  const std::string range = std::to_string(min_port) + "..65535";
  std::uint32_t port = 0;
  for (const char c : port_text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      fail(error, "invalid port " + quoted(port_text) + " in " + quoted(text) +
                      " (expected a number " + range + ")");
      return std::nullopt;
    }
    // Saturate rather than overflow: anything past 65535 is out of range either way.
    port = std::min<std::uint32_t>(port * 10 + (c - '0'), 100'000);
  }
  if (port < min_port || port > 65535) {
    fail(error, "port " + std::string(port_text) + " out of range (" + range + ")");
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(port);
}

}  // namespace

std::optional<HostPort> parse_host_port(std::string_view text, bool allow_zero_port,
                                        std::string* error) {
  if (text.empty()) {
    fail(error, "empty address (expected host:port)");
    return std::nullopt;
  }
  if (text.find("://") != std::string_view::npos) {
    fail(error, quoted(text) + " must be host:port, without a scheme");
    return std::nullopt;
  }
  const auto parts = text.front() == '[' ? split_bracketed(text, error) : split_plain(text, error);
  if (!parts) return std::nullopt;
  const auto port = parse_port(parts->port, text, allow_zero_port, error);
  if (!port) return std::nullopt;
  return HostPort{std::string(parts->host), *port};
}

std::string format_duration(Duration duration) {
  const auto ms = duration.count();
  if (ms < 0) return "-" + format_in(duration_units, static_cast<std::uint64_t>(-ms), "0s");
  return format_in(duration_units, static_cast<std::uint64_t>(ms), "0s");
}

std::string format_size(std::uint64_t bytes) { return format_in(size_units, bytes, "0B"); }

}  // namespace sluice::config
