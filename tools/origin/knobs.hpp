#pragma once
// What a request asks the test origin to do: status, delay, body size and framing, how to close,
// echo or sink. Parsed per request on the connection's own thread; a plain value, no sharing.

#include <cstdint>
#include <optional>
#include <string_view>

namespace sluice::origin {

enum class close_mode : std::uint8_t {
  none,
  before,  // read the request, then close without a response
  mid,     // send the head and half of the body, then close
  after,   // answer with `Connection: close`, then close
};

enum class sink_mode : std::uint8_t {
  off,
  count,   // count the body bytes only: fast enough for upload benchmarks
  sha256,  // also hash them, for tests that verify integrity
};

struct knobs {
  std::optional<unsigned> status;
  std::uint64_t delay_ms = 0;
  std::optional<std::uint64_t> size;
  bool chunked = false;
  close_mode close = close_mode::none;
  bool echo = false;
  sink_mode sink = sink_mode::off;
  // A WebSocket upgrade request is accepted (101) and every message echoed back; without
  // `Upgrade: websocket` the answer is 400.
  bool websocket = false;

  // Sets the knob called `name` (case-insensitive) from `value`. Unknown names are ignored, so a
  // query string may carry unrelated parameters (cache busters, the /health/status code).
  // Returns false when the name is a knob but the value is not valid for it.
  bool set(std::string_view name, std::string_view value);
};

// The path of a request target: origin-form up to '?', or the path part of an absolute-form target.
std::string_view target_path(std::string_view target);

// Calls fn(name, value) for each `name=value` (or bare `name`) in the target's query string, in
// order.
template <class Fn>
void for_each_query_param(std::string_view target, Fn&& fn) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return;
  std::string_view rest = target.substr(q + 1);
  // A fragment is never sent by conforming clients, but stop at one rather than misread it.
  rest = rest.substr(0, rest.find('#'));
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    if (eq == std::string_view::npos)
      fn(pair, std::string_view{});
    else
      fn(pair.substr(0, eq), pair.substr(eq + 1));
  }
}

// Parses a plain non-negative decimal integer; no sign, no suffix, no surrounding space.
std::optional<std::uint64_t> parse_decimal(std::string_view text);

}  // namespace sluice::origin
