// [upstreams.NAME.retry]: which failures are tried again, and how often (docs/retries.md).
#include "reader.hpp"
#include "sluice/config/units.hpp"
#include "sluice/http/edge_rules.hpp"

namespace sluice::config {

namespace retry_section {

using R = RetryConfig;

// The effective `retry.on` as written in TOML.
std::string retry_on_text(const void* object) {
  const auto& r = *static_cast<const R*>(object);
  std::vector<std::string> items;
  const std::pair<bool, std::string_view> words[] = {
      {r.on_connect, "connect"}, {r.on_refused, "refused"}, {r.on_reset, "reset"}, {r.on_timeout, "timeout"}};
  for (const auto& [on, word] : words)
    if (on) items.push_back(toml_string(word));
  for (const unsigned status : r.on_status) items.push_back(std::to_string(status));
  return "[" + join_strings(items) + "]";
}

const KeySpec retry_rows[] = {
    integer_key<&R::attempts>("attempts", 1, 10, "Tries including the first; 1 = no retry."),
    custom_key("on", retry_on_text, "Which failures are retried."),
    string_key<&R::idempotency_header>("idempotency_header", "A request with this header may be retried."),
    duration_key<&R::per_try_timeout>("per_try_timeout", true, "Each try's response timeout; 0 = response_timeout."),
    duration_key<&R::deadline>("deadline", true, "The whole request across tries; 0 = none."),
    duration_key<&R::backoff>("backoff", true, "The first wait before a retry."),
    duration_key<&R::backoff_max>("backoff_max", true, "The longest wait before a retry."),
    number_key<&R::budget>("budget", 0.0, 10.0, "Retries per request over budget_window."),
    duration_key<&R::budget_window>("budget_window", false, "The window of the retry budget."),
    number_key<&R::budget_min_per_sec>("budget_min_per_sec", 0.0, 100000.0, "Retries per second always allowed."),
    custom_key("budget_min", nullptr, "Deprecated alias of budget_min_per_sec."),
    size_key<&R::buffer>("buffer", 0, 64 * MiB, "Request body kept for a replay."),
};

// Deprecated (the token budget before budget_window): read as budget_min_per_sec.
void read_budget_min(Reader& r, const toml::table& table, const std::string& p, R& retry) {
  std::int64_t budget_min = 0;
  const auto* node = r.take_integer(table, "budget_min", p + ".budget_min", budget_min, 0, 100000);
  if (node == nullptr) return;
  if (table.contains("budget_min_per_sec")) {
    r.error(*node, p + ".budget_min", "deprecated alias of budget_min_per_sec; set only one");
    return;
  }
  retry.budget_min_per_sec = static_cast<double>(budget_min);
  r.warn(*node, p + ".budget_min",
         "deprecated: read as budget_min_per_sec = " + std::to_string(budget_min) +
             " (retries per second always allowed)");
}

// Rules between retry keys and the upstream's timeouts, each reported at the key that breaks
// it (or the [retry] table when that key is left at its default).
void check_retry_rules(Reader& r, const toml::table& retry, const std::string& p, const UpstreamConfig& u) {
  const auto at = [&](std::string_view key) -> const toml::node& {
    const toml::node* node = retry.get(key);
    return node != nullptr ? *node : static_cast<const toml::node&>(retry);
  };
  const auto& c = u.retry;
  if (c.backoff > c.backoff_max)
    r.error(at("backoff"), p + ".backoff",
            "must not exceed backoff_max (" + format_duration(c.backoff_max) + "), got " + format_duration(c.backoff));
  if (c.per_try_timeout > u.response_timeout)
    r.error(at("per_try_timeout"), p + ".per_try_timeout",
            "must not exceed response_timeout (" + format_duration(u.response_timeout) + "), got " +
                format_duration(c.per_try_timeout));
  // Without per_try_timeout a deadline shorter than response_timeout is a plain cap on the
  // request ("answer within 300ms"); with one, a deadline that cannot hold one try is a typo.
  if (c.deadline != Duration::zero() && c.per_try_timeout != Duration::zero() && c.deadline < c.per_try_timeout)
    r.error(at("deadline"), p + ".deadline",
            "must be at least one try's timeout (per_try_timeout " + format_duration(c.per_try_timeout) + "), got " +
                format_duration(c.deadline));
  // RFC 9110 §5.1: a field name is a token.
  if (!c.idempotency_header.empty() && !http::is_token(c.idempotency_header))
    r.error(at("idempotency_header"), p + ".idempotency_header",
            "'" + c.idempotency_header + "' is not a header name (letters, digits and !#$%&'*+-.^_`|~)");
}

}  // namespace retry_section

const KeyTable retry_table = retry_section::retry_rows;

// Needs the whole upstream: its rules relate retry keys to the upstream's timeouts, which are
// read before.
void read_retry(Reader& r, const toml::table& upstream, const std::string& path, UpstreamConfig& u) {
  using namespace retry_section;
  const toml::table& table = r.section_or_empty(upstream, "retry");
  const std::string p = path + ".retry";
  RetryConfig& c = u.retry;
  const Read read = r.walk(table, p, retry_table, &c);
  std::vector<std::string> on;
  if (read["on"] != nullptr) {
    if (const auto* node = r.take_strings(table, "on", p + ".on", on)) {
      c.on_connect = c.on_refused = c.on_reset = c.on_timeout = false;
      c.on_status.clear();
      r.check_failure_items(*node, p + ".on", on, &c);
    }
  }
  read_budget_min(r, table, p, c);
  r.record(table, p, retry_table, &c);
  if (upstream.get_as<toml::table>("retry") != nullptr) check_retry_rules(r, table, p, u);
}

}  // namespace sluice::config
