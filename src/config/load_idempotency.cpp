// [upstreams.NAME.idempotency] (docs/idempotency.md). Every key is live; a change of store,
// memory_limit or store_timeout starts a new, empty store (idempotency::make_guard).
#include <charconv>

#include "reader.hpp"
#include "sluice/config/units.hpp"
#include "sluice/http/edge_rules.hpp"

namespace sluice::config {

namespace idempotency_section {

using I = idempotency::Config;

const KeySpec idempotency_rows[] = {
    choice_key<&I::mode>("mode", "idempotency mode", "off, collapse (one request per key at once) or replay."),
    string_key<&I::header>("header", "The key's header; \"\" = retry.idempotency_header."),
    duration_key<&I::replay_window>("replay_window", false, "How long an answer is replayed."),
    size_key<&I::max_stored_body>("max_stored_body", 0, 64 * MiB, "Larger answers are not kept."),
    strings_key<&I::store_statuses>("store_statuses", "Status classes (\"2xx\") or codes (\"409\") kept."),
    strings_key<&I::scope>("scope", "What scopes the key: \"header:NAME\" or \"client_ip\"."),
    duration_key<&I::wait>("wait", false, "A duplicate waits this long for the first's answer."),
    string_key<&I::store>("store", "\"memory\" or \"redis://HOST:PORT/DB\"."),
    size_key<&I::memory_limit>("memory_limit", 64 * KiB, 64 * GiB, "The memory store's size."),
    choice_key<&I::on_store_error>("on_store_error", "on_store_error policy", "forward or reject when the store fails."),
    duration_key<&I::store_timeout>("store_timeout", false, "A store operation's timeout."),
};

// store_statuses: classes ("2xx") or codes ("409"), each reported at its index.
void check_store_statuses(Reader& r, const toml::node& node, const std::string& path, I& c) {
  c.store_classes = 0;
  c.store_codes.clear();
  for (std::size_t i = 0; i < c.store_statuses.size(); ++i) {
    const auto& s = c.store_statuses[i];
    unsigned code = 0;
    const auto res = std::from_chars(s.data(), s.data() + s.size(), code);
    if (s.size() == 3 && s[0] >= '1' && s[0] <= '5' && s[1] == 'x' && s[2] == 'x')
      c.store_classes |= 1u << (s[0] - '0');
    else if (res.ec == std::errc() && res.ptr == s.data() + s.size() && code >= 100 && code <= 599)
      c.store_codes.push_back(code);
    else
      r.error(*node.as_array()->get(i), index_path(path, i),
              "expected a status class like \"2xx\" or a code like \"409\", got '" + s + "'");
  }
}

void check_scope(Reader& r, const toml::node& node, const std::string& path, const I& c) {
  for (std::size_t i = 0; i < c.scope.size(); ++i) {
    const auto& s = c.scope[i];
    const bool header = s.starts_with("header:") && http::is_token(std::string_view(s).substr(7));
    if (!header && s != "client_ip")
      r.error(*node.as_array()->get(i), index_path(path, i), "expected \"header:NAME\" or \"client_ip\", got '" + s + "'");
  }
}

}  // namespace idempotency_section

const KeyTable idempotency_table = idempotency_section::idempotency_rows;

void read_idempotency(Reader& r, const toml::table& upstream, const std::string& path, idempotency::Config& c) {
  using namespace idempotency_section;
  const toml::table& table = r.section_or_empty(upstream, "idempotency");
  const std::string p = path + ".idempotency";
  const Read read = r.walk(table, p, idempotency_table, &c);
  if (const auto* node = read["header"]; node != nullptr && !c.header.empty() && !http::is_token(c.header))
    r.error(*node, p + ".header",
            "must be a header name (a token) or \"\" (the retry section's idempotency_header), got '" + c.header + "'");
  if (const auto* node = read["store_statuses"]) check_store_statuses(r, *node, p + ".store_statuses", c);
  if (const auto* node = read["scope"]) check_scope(r, *node, p + ".scope", c);
  if (const auto* node = read["store"]; node != nullptr && c.store != "memory") {
    if (const auto a = idempotency::parse_redis_url(c.store); !a.ok) r.error(*node, p + ".store", a.why);
  }
  if (c.store == "memory" && c.mode != idempotency::Mode::off && c.memory_limit < 4 * c.max_stored_body) {
    const toml::node* limit = read["memory_limit"];
    r.error(limit != nullptr ? *limit : static_cast<const toml::node&>(table), p + ".memory_limit",
            "must hold at least 4 answers of max_stored_body (" + format_size(c.max_stored_body) + "), got " +
                format_size(c.memory_limit));
  }
  r.record(table, p, idempotency_table, &c);
}

}  // namespace sluice::config
