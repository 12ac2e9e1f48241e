// [log]: the error log and the access log (docs/configuration.md).
#include "reader.hpp"
#include "sluice/core/log_file.hpp"

namespace sluice::config {

namespace log_section {

using L = LogSection;

// All live: the loggers switch at the reload. A file the process could not open is an error
// here, at the key, for `check` as for `run` and reload; `check` does not create it.
const KeySpec log_rows[] = {
    choice_key<&L::level>("level", "log level", "Error-log verbosity."),
    choice_key<&L::access>("access", "access log format", "The access log's format, or off."),
    string_key<&L::access_file>("access_file", "The access log's file; \"\" = stdout.")
        .rule([](const void* l) { return log_file_problem(static_cast<const L*>(l)->access_file); }),
    string_key<&L::error_file>("error_file", "The error log's file; \"\" = stderr.")
        .rule([](const void* l) { return log_file_problem(static_cast<const L*>(l)->error_file); }),
    choice_key<&L::error_format>("error_format", "error log format", "The error log's format."),
};

}  // namespace log_section

const KeyTable log_table = log_section::log_rows;

void read_log(Reader& r, const toml::node& node, const std::string& path, LogSection& out) {
  const toml::table& table = r.table_or_empty(&node, path);
  r.walk(table, path, log_table, &out);
  r.record(table, path, log_table, &out);
}

}  // namespace sluice::config
