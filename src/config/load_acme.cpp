// [acme]: where the ACME account key and issued certificates are kept (docs/tls.md).
#include "reader.hpp"

namespace sluice::config {

namespace acme_section {

using A = AcmeSection;

// Read once, by the ACME client started with the process.
const KeySpec acme_rows[] = {
    string_key<&A::storage>("storage", "Directory of the ACME account key and certificates.")
        .restart()
        .rule([](const void* a) -> std::string {
          const auto& dir = static_cast<const A*>(a)->storage;
          return dir.starts_with("/") ? "" : "must be an absolute directory path, got '" + dir + "'";
        }),
};

}  // namespace acme_section

const KeyTable acme_table = acme_section::acme_rows;

void read_acme_section(Reader& r, const toml::node& node, const std::string& path, AcmeSection& out) {
  const toml::table& table = r.table_or_empty(&node, path);
  r.walk(table, path, acme_table, &out);
  r.record(table, path, acme_table, &out);
}

}  // namespace sluice::config
