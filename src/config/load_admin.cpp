// [admin]: the admin API's listener (docs/admin.md).
#include <boost/url/ipv4_address.hpp>
#include <boost/url/ipv6_address.hpp>

#include "reader.hpp"
#include "sluice/core/file.hpp"

namespace sluice::config {

namespace admin_section {

using A = AdminSection;

// 127.0.0.0/8, ::1 and "localhost": addresses only this host can connect to.
bool is_loopback_host(std::string_view host) {
  if (lower(host) == "localhost") return true;
  if (const auto v4 = boost::urls::parse_ipv4_address(host)) return v4->is_loopback();
  if (const auto v6 = boost::urls::parse_ipv6_address(host)) return v6->is_loopback();
  return false;
}

// The runtime reads the token at start-up and on reload; a file it could not use is an error
// here, at the key, for `check` as for `run`.
std::string token_file_problem(const void* a) {
  const std::string& file = static_cast<const A*>(a)->token_file;
  if (file.empty()) return "must not be empty; remove the key to leave POSTs open";
  std::string token;
  if (const int e = read_whole_file(file, token); e != 0)
    return "cannot read '" + file + "': " + std::system_category().message(e);
  if (token.find_first_not_of(" \t\r\n") == std::string::npos) return "the token file '" + file + "' is empty";
  return {};
}

// allowed_hosts = ["sluice.internal"]: names a browser may reach the admin API by, lower-cased.
void read_allowed_hosts(Reader& r, const toml::node& node, const std::string& path, std::vector<std::string>& hosts) {
  if (!r.take_strings(node, path, hosts)) return;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    auto& host = hosts[i];
    host = lower(host);
    const bool name = !host.empty() && std::ranges::all_of(host, [](unsigned char c) {
      return std::isalnum(c) != 0 || c == '-' || c == '.';
    });
    if (!name)
      r.error(*node.as_array()->get(i), index_path(path, i),
              "'" + host + "' is not a host name (letters, digits, '-' and '.'; no port)");
  }
}

void read_listen(Reader& r, const toml::node& node, const std::string& path, HostPort& out) {
  if (auto address = r.parse_address(node, path, true)) out = std::move(*address);
}

const KeySpec admin_rows[] = {
    value_key<&A::listen, read_listen, [](const HostPort& a) { return toml_string(a.to_string()); }>(
        "listen", "The admin API's address.")
        .docs("string (host:port)"),
    string_key<&A::token_file>("token_file", "The bearer token every POST must present.").rule(token_file_problem),
    value_key<&A::allowed_hosts, read_allowed_hosts, [](const std::vector<std::string>& hosts) {
      std::vector<std::string> items;
      for (const auto& h : hosts) items.push_back(toml_string(h));
      return "[" + join_strings(items) + "]";
    }>("allowed_hosts", "Host names accepted besides localhost and IP literals.").docs("array of strings"),
};

}  // namespace admin_section

const KeyTable admin_table = admin_section::admin_rows;

void read_admin(Reader& r, const toml::node& node, const std::string& path, AdminSection& out) {
  using namespace admin_section;
  const toml::table* table = r.table_at(&node, path);
  if (table == nullptr) return;
  out.enabled = true;  // the section's presence is the switch
  const Read read = r.walk(*table, path, admin_table, &out);
  if (read.present<&A::listen>() && read.at<&A::listen>() == nullptr) return;
  r.record(*table, path, admin_table, &out);
  // The admin API drains servers and reloads the config: beyond loopback, only with a token.
  if (out.token_file.empty() && !is_loopback_host(out.listen.host))
    r.error(read.where<&A::listen>(), read.path<&A::listen>(), "admin listener on a non-loopback address needs token_file");
  // Port 0 asks the OS for a free port, which cannot collide.
  if (out.listen.port != 0)
    r.claim_listener(out.listen, read.where<&A::listen>().source(), read.path<&A::listen>());
}

}  // namespace sluice::config
