// [upstreams.NAME.retry]: which failures are tried again, and how often (docs/retries.md).
#include "reader.hpp"
#include "sluice/config/units.hpp"
#include "sluice/core/grpc_codes.hpp"
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
  for (std::size_t code = 1; code < grpc_code_count; ++code) {
    if ((r.on_grpc >> code & 1u) == 0) continue;
    items.push_back(toml_string(std::string(grpc_item_prefix) + lower(grpc_code_names[code])));
  }
  return "[" + join_strings(items) + "]";
}

void read_on(Reader& r, const toml::node& node, const std::string& path, void* object) {
  auto& c = *static_cast<R*>(object);
  std::vector<std::string> on;
  if (!r.take_strings(node, path, on)) return;
  c.on_connect = c.on_refused = c.on_reset = c.on_timeout = false;
  c.on_status.clear();
  c.on_grpc = 0;
  r.check_failure_items(node, path, on, &c);
}

// Deprecated (the token budget before budget_window): read as budget_min_per_sec, which it may
// not be set beside. Its row has no member of its own: read_retry reads it.
constexpr KeySpec budget_min_row = custom_key<&R::budget_min_per_sec>("budget_min", nullptr, nullptr,
                                                                     "Deprecated alias of budget_min_per_sec.")
                                       .docs("integer", "0..100000");

void read_budget_min(Reader& r, const Read& read, R& c) {
  const toml::node* node = read[budget_min_row];
  std::int64_t budget_min = 0;
  const std::string path = child_path(read.path(), budget_min_row.name);
  if (node == nullptr || r.take_integer(*node, path, budget_min, 0, 100000) == nullptr) return;
  if (read.present<&R::budget_min_per_sec>()) {
    r.error(*node, path, "deprecated alias of budget_min_per_sec; set only one");
    return;
  }
  c.budget_min_per_sec = static_cast<double>(budget_min);
  r.warn(*node, path,
         "deprecated: read as budget_min_per_sec = " + std::to_string(budget_min) +
             " (retries per second always allowed)");
}

const KeySpec retry_rows[] = {
    integer_key<&R::attempts>("attempts", 1, 10, "Tries including the first; 1 = no retry."),
    custom_key<&R::on_status>("on", read_on, retry_on_text, "Which failures are retried.").docs("array of strings"),
    // RFC 9110 §5.1: a field name is a token.
    string_key<&R::idempotency_header>("idempotency_header", "A request with this header may be retried.")
        .rule([](const void* r) -> std::string {
          const auto& h = static_cast<const R*>(r)->idempotency_header;
          if (h.empty() || http::is_token(h)) return {};
          return "'" + h + "' is not a header name (letters, digits and !#$%&'*+-.^_`|~)";
        }),
    duration_key<&R::per_try_timeout>("per_try_timeout", true, "Each try's response timeout; 0 = response_timeout."),
    // Without per_try_timeout a deadline shorter than response_timeout is a plain cap on the
    // request ("answer within 300ms"); with one, a deadline that cannot hold one try is a typo.
    duration_key<&R::deadline>("deadline", true, "The whole request across tries; 0 = none.")
        .rule([](const void* object) -> std::string {
          const auto& c = *static_cast<const R*>(object);
          if (c.deadline == Duration::zero() || c.per_try_timeout == Duration::zero() || c.deadline >= c.per_try_timeout)
            return {};
          return "must be at least one try's timeout (per_try_timeout " + format_duration(c.per_try_timeout) +
                 "), got " + format_duration(c.deadline);
        }, true),
    duration_key<&R::backoff>("backoff", true, "The first wait before a retry.")
        .rule([](const void* object) -> std::string {
          const auto& c = *static_cast<const R*>(object);
          if (c.backoff <= c.backoff_max) return {};
          return "must not exceed backoff_max (" + format_duration(c.backoff_max) + "), got " + format_duration(c.backoff);
        }, true),
    duration_key<&R::backoff_max>("backoff_max", true, "The longest wait before a retry."),
    number_key<&R::budget>("budget", 0.0, 10.0, "Retries per request over budget_window."),
    duration_key<&R::budget_window>("budget_window", false, "The window of the retry budget."),
    number_key<&R::budget_min_per_sec>("budget_min_per_sec", 0.0, 100000.0, "Retries per second always allowed."),
    budget_min_row,
    size_key<&R::buffer>("buffer", 0, 64 * MiB, "Request body kept for a replay."),
};

}  // namespace retry_section

const KeyTable retry_table = retry_section::retry_rows;

void read_retry(Reader& r, const toml::node& node, const std::string& path, void* upstream) {
  using namespace retry_section;
  auto& u = *static_cast<UpstreamConfig*>(upstream);
  const toml::table& table = r.table_or_empty(&node, path);
  const Read read = r.walk(table, path, retry_table, &u.retry);
  read_budget_min(r, read, u.retry);
  r.record(table, path, retry_table, &u.retry);
  // Relates a retry key to the upstream's timeouts (typed rows: read before this table).
  if (u.retry.per_try_timeout > u.response_timeout)
    r.error(read.where<&R::per_try_timeout>(), read.path<&R::per_try_timeout>(),
            "must not exceed response_timeout (" + format_duration(u.response_timeout) + "), got " +
                format_duration(u.retry.per_try_timeout));
}

}  // namespace sluice::config
