// [upstreams.NAME.idempotency] (docs/idempotency.md). Every key is live; a change of store,
// memory_limit or store_timeout starts a new, empty store (idempotency::make_guard).
#include <charconv>

#include "reader.hpp"
#include "sluice/config/units.hpp"
#include "sluice/http/edge_rules.hpp"

namespace sluice::config {

namespace idempotency_section {

using I = idempotency::Config;

std::string store_statuses_text(const void* object) {
  const auto& c = *static_cast<const I*>(object);
  std::vector<std::string> items;
  for (unsigned k = 1; k <= 5; ++k)
    if ((c.store_classes & (1u << k)) != 0) items.push_back(toml_string(std::to_string(k) + "xx"));
  for (const unsigned code : c.store_codes) items.push_back(toml_string(std::to_string(code)));
  return "[" + join_strings(items) + "]";
}

std::string scope_text(const void* object) {
  std::vector<std::string> items;
  for (const auto& s : static_cast<const I*>(object)->scope)
    items.push_back(toml_string(s.kind == idempotency::ScopePart::Kind::client_ip ? "client_ip" : "header:" + s.header));
  return "[" + join_strings(items) + "]";
}

const KeySpec idempotency_rows[] = {
    choice_key<&I::mode>("mode", "idempotency mode", "off, collapse (one request per key at once) or replay."),
    string_key<&I::header>("header", "The key's header; \"\" = retry.idempotency_header.")
        .rule([](const void* object) -> std::string {
          const auto& h = static_cast<const I*>(object)->header;
          if (h.empty() || http::is_token(h)) return {};
          return "must be a header name (a token) or \"\" (the retry section's idempotency_header), got '" + h + "'";
        }),
    duration_key<&I::replay_window>("replay_window", false, "How long an answer is replayed."),
    size_key<&I::max_stored_body>("max_stored_body", 0, 64 * MiB, "Larger answers are not kept."),
    custom_key("store_statuses", store_statuses_text, "Status classes (\"2xx\") or codes (\"409\") kept."),
    custom_key("scope", scope_text, "What scopes the key: \"header:NAME\" or \"client_ip\"."),
    duration_key<&I::wait>("wait", false, "A duplicate waits this long for the first's answer."),
    string_key<&I::store>("store", "\"memory\" or \"redis://HOST:PORT/DB\"."),
    size_key<&I::memory_limit>("memory_limit", 64 * KiB, 64 * GiB, "The memory store's size."),
    choice_key<&I::on_store_error>("on_store_error", "on_store_error policy", "forward or reject when the store fails."),
    duration_key<&I::store_timeout>("store_timeout", false, "A store operation's timeout."),
};

// store_statuses: classes ("2xx") or codes ("409"), each reported at its index.
void read_store_statuses(Reader& r, const toml::table& table, const std::string& path, I& c) {
  std::vector<std::string> statuses;
  const toml::node* node = r.take_strings(table, "store_statuses", path, statuses);
  if (node == nullptr) return;
  c.store_classes = 0;
  c.store_codes.clear();
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    const auto& s = statuses[i];
    unsigned code = 0;
    const auto res = std::from_chars(s.data(), s.data() + s.size(), code);
    if (s.size() == 3 && s[0] >= '1' && s[0] <= '5' && s[1] == 'x' && s[2] == 'x')
      c.store_classes |= 1u << (s[0] - '0');
    else if (res.ec == std::errc() && res.ptr == s.data() + s.size() && code >= 100 && code <= 599)
      c.store_codes.push_back(code);
    else
      r.error(*node->as_array()->get(i), index_path(path, i),
              "expected a status class like \"2xx\" or a code like \"409\", got '" + s + "'");
  }
}

void read_scope(Reader& r, const toml::table& table, const std::string& path, I& c) {
  std::vector<std::string> scope;
  const toml::node* node = r.take_strings(table, "scope", path, scope);
  if (node == nullptr) return;
  c.scope.clear();
  for (std::size_t i = 0; i < scope.size(); ++i) {
    const std::string_view s = scope[i];
    using Kind = idempotency::ScopePart::Kind;
    if (s == "client_ip") c.scope.push_back({Kind::client_ip, {}});
    else if (s.starts_with("header:") && http::is_token(s.substr(7))) c.scope.push_back({Kind::header, std::string(s.substr(7))});
    else r.error(*node->as_array()->get(i), index_path(path, i), "expected \"header:NAME\" or \"client_ip\", got '" + scope[i] + "'");
  }
}

}  // namespace idempotency_section

const KeyTable idempotency_table = idempotency_section::idempotency_rows;

void read_idempotency(Reader& r, const toml::table& upstream, const std::string& path, idempotency::Config& c) {
  using namespace idempotency_section;
  const toml::table& table = r.section_or_empty(upstream, "idempotency");
  const std::string p = path + ".idempotency";
  const Read read = r.walk(table, p, idempotency_table, &c);
  read_store_statuses(r, table, p + ".store_statuses", c);
  read_scope(r, table, p + ".scope", c);
  if (const auto* node = read["store"]; node != nullptr && c.store != "memory") {
    auto address = idempotency::parse_redis_url(c.store);
    if (address.ok) c.redis = std::move(address);
    else r.error(*node, p + ".store", address.why);
  }
  if (!c.redis && c.mode != idempotency::Mode::off && c.memory_limit < 4 * c.max_stored_body) {
    const toml::node* limit = read["memory_limit"];
    r.error(limit != nullptr ? *limit : static_cast<const toml::node&>(table), p + ".memory_limit",
            "must hold at least 4 answers of max_stored_body (" + format_size(c.max_stored_body) + "), got " +
                format_size(c.memory_limit));
  }
  r.record(table, p, idempotency_table, &c);
}

}  // namespace sluice::config
