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

std::string scope_text(const std::vector<idempotency::ScopePart>& scope) {
  std::vector<std::string> items;
  for (const auto& s : scope)
    items.push_back(toml_string(s.kind == idempotency::ScopePart::Kind::client_ip ? "client_ip" : "header:" + s.header));
  return "[" + join_strings(items) + "]";
}

// store_statuses: classes ("2xx") or codes ("409"), each reported at its index.
void read_store_statuses(Reader& r, const toml::node& node, const std::string& path, void* object) {
  auto& c = *static_cast<I*>(object);
  std::vector<std::string> statuses;
  if (!r.take_strings(node, path, statuses)) return;
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
      r.error(*node.as_array()->get(i), index_path(path, i),
              "expected a status class like \"2xx\" or a code like \"409\", got '" + s + "'");
  }
}

void read_scope(Reader& r, const toml::node& node, const std::string& path, std::vector<idempotency::ScopePart>& out) {
  std::vector<std::string> scope;
  if (!r.take_strings(node, path, scope)) return;
  out.clear();
  for (std::size_t i = 0; i < scope.size(); ++i) {
    const std::string_view s = scope[i];
    using Kind = idempotency::ScopePart::Kind;
    if (s == "client_ip") out.push_back({Kind::client_ip, {}});
    else if (s.starts_with("header:") && http::is_token(s.substr(7))) out.push_back({Kind::header, std::string(s.substr(7))});
    else r.error(*node.as_array()->get(i), index_path(path, i), "expected \"header:NAME\" or \"client_ip\", got '" + scope[i] + "'");
  }
}

// "memory", or a Redis URL parsed once here.
void read_store(Reader& r, const toml::node& node, const std::string& path, void* object) {
  auto& c = *static_cast<I*>(object);
  if (!r.take_string(node, path, c.store) || c.store == "memory") return;
  auto address = idempotency::parse_redis_url(c.store);
  if (address.ok) c.redis = std::move(address);
  else r.error(node, path, address.why);
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
    custom_key<&I::store_classes>("store_statuses", read_store_statuses, store_statuses_text,
                                  "Status classes (\"2xx\") or codes (\"409\") kept.")
        .docs("array of strings"),
    value_key<&I::scope, read_scope, scope_text>("scope", "What scopes the key: \"header:NAME\" or \"client_ip\".")
        .docs("array of strings"),
    duration_key<&I::wait>("wait", false, "A duplicate waits this long for the first's answer."),
    custom_key<&I::store>("store", read_store, [](const void* c) { return toml_string(static_cast<const I*>(c)->store); },
                          "\"memory\" or \"redis://HOST:PORT/DB\".")
        .docs("string"),
    size_key<&I::memory_limit>("memory_limit", 64 * KiB, 64 * GiB, "The memory store's size."),
    choice_key<&I::on_store_error>("on_store_error", "on_store_error policy", "forward or reject when the store fails."),
    duration_key<&I::store_timeout>("store_timeout", false, "A store operation's timeout."),
};

}  // namespace idempotency_section

const KeyTable idempotency_table = idempotency_section::idempotency_rows;

void read_idempotency(Reader& r, const toml::node& node, const std::string& path, idempotency::Config& c) {
  using namespace idempotency_section;
  const toml::table& table = r.table_or_empty(&node, path);
  const Read read = r.walk(table, path, idempotency_table, &c);
  if (!c.redis && c.mode != idempotency::Mode::off && c.memory_limit < 4 * c.max_stored_body) {
    r.error(read.where<&I::memory_limit>(), read.path<&I::memory_limit>(),
            "must hold at least 4 answers of max_stored_body (" + format_size(c.max_stored_body) + "), got " +
                format_size(c.memory_limit));
  }
  r.record(table, path, idempotency_table, &c);
}

}  // namespace sluice::config
