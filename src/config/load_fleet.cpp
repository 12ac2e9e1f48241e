// [fleet]: several instances sharing drains through Redis (docs/fleet.md). The link to Redis is
// made once, at start: every key is a restart key.
#include "reader.hpp"
#include "sluice/config/idempotency.hpp"

namespace sluice::config {

namespace fleet_section {

using F = FleetSection;

// "unix:/PATH" or "redis://HOST:PORT/DB", parsed once here.
void read_redis(Reader& r, const toml::node& node, const std::string& path, void* object) {
  auto& f = *static_cast<F*>(object);
  if (!r.take_string(node, path, f.redis)) return;
  constexpr std::string_view unix_scheme = "unix:";
  if (std::string_view(f.redis).starts_with(unix_scheme)) {
    f.unix_path = f.redis.substr(unix_scheme.size());
    if (!f.unix_path.starts_with('/'))
      r.error(node, path, "expected an absolute socket path after \"unix:\", got '" + f.redis + "'");
    return;
  }
  if (!std::string_view(f.redis).starts_with("redis://")) {
    r.error(node, path, "expected \"redis://HOST:PORT/DB\" or \"unix:/PATH\", got '" + f.redis + "'");
    return;
  }
  const auto address = idempotency::parse_redis_url(f.redis);
  if (!address.ok) {
    r.error(node, path, address.why);
    return;
  }
  f.host = address.host;
  f.port = address.port;
  f.db = address.db;
}

const KeySpec fleet_rows[] = {
    custom_key<&F::redis>("redis", read_redis, [](const void* f) { return toml_string(static_cast<const F*>(f)->redis); },
                          "Where the fleet's state is: \"redis://HOST:PORT/DB\" or \"unix:/PATH\".")
        .needed("the fleet's Redis")
        .restart()
        .docs("string"),
    string_key<&F::name>("name", "This instance's name in the fleet; \"\" = host name and first listen address.")
        .restart(),
    duration_key<&F::lease_ttl>("lease_ttl", false, "How long an instance not heard from keeps what it holds.")
        .at_most(std::chrono::minutes(10))
        .restart(),
    duration_key<&F::ticket_key_rotation>("ticket_key_rotation", false,
                                          "How often a new session ticket key is made for the fleet.")
        .at_most(std::chrono::hours(24 * 7))
        .rule([](const void* f) -> std::string {
          return static_cast<const F*>(f)->ticket_key_rotation < std::chrono::seconds(1) ? "must be at least 1s" : "";
        })
        .restart(),
};

}  // namespace fleet_section

const KeyTable fleet_table = fleet_section::fleet_rows;

void read_fleet(Reader& r, const toml::node& node, const std::string& path, FleetSection& out) {
  const toml::table* table = r.table_at(&node, path);
  if (table == nullptr) return;
  out.enabled = true;  // the section's presence is the switch
  r.walk(*table, path, fleet_table, &out);
  r.record(*table, path, fleet_table, &out);
}

}  // namespace sluice::config
