// [reload]: how a reload is watched and rolled back (docs/operations.md).
#include "reader.hpp"

namespace sluice::config {

namespace reload_section {

using R = ReloadSection;

const KeySpec reload_rows[] = {
    // Watching a reload for longer than this holds the previous config for a rollback nobody expects.
    duration_key<&R::watch>("watch", true, "How long a reload's traffic is watched; 0s = not watched.")
        .at_most(std::chrono::hours(1)),
    number_key<&R::failed_percent>("failed_percent", 0.1, 100.0, "The failed share that breaches, in percent."),
    number_key<&R::failed_factor>("failed_factor", 1.0, 1000.0, "... and how many times the share before."),
    integer_key<&R::min_requests>("min_requests", 1, 1'000'000'000, "Fewer answers than this: too few to judge."),
    integer_key<&R::up_lost_percent>("up_lost_percent", 1, 100, "An upstream losing more servers up breaches."),
};

}  // namespace reload_section

const KeyTable reload_table = reload_section::reload_rows;

void read_reload(Reader& r, const toml::node& node, const std::string& path, ReloadSection& out) {
  const toml::table& table = r.table_or_empty(&node, path);
  r.walk(table, path, reload_table, &out);
  r.record(table, path, reload_table, &out);
}

}  // namespace sluice::config
