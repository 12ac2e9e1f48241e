// [admin]: the admin API's listener (docs/admin.md).
#include <boost/url/ipv4_address.hpp>
#include <boost/url/ipv6_address.hpp>

#include "reader.hpp"
#include "sluice/core/file.hpp"

namespace sluice::config {

namespace admin_section {

using A = AdminSection;

const KeySpec admin_rows[] = {
    custom_key("listen", [](const void* a) { return toml_string(static_cast<const A*>(a)->listen.to_string()); },
               "The admin API's address."),
    string_key<&A::token_file>("token_file", "The bearer token every POST must present."),
    strings_key<&A::allowed_hosts>("allowed_hosts", "Host names accepted besides localhost and IP literals."),
};

// 127.0.0.0/8, ::1 and "localhost": addresses only this host can connect to.
bool is_loopback_host(std::string_view host) {
  if (lower(host) == "localhost") return true;
  if (const auto v4 = boost::urls::parse_ipv4_address(host)) return v4->is_loopback();
  if (const auto v6 = boost::urls::parse_ipv6_address(host)) return v6->is_loopback();
  return false;
}

// The runtime reads the token at start-up and on reload; a file it could not use is an error
// here, at the key, for `check` as for `run`.
void check_token_file(Reader& r, const toml::node& node, const std::string& file) {
  if (file.empty()) {
    r.error(node, "admin.token_file", "must not be empty; remove the key to leave POSTs open");
    return;
  }
  std::string token;
  if (const int e = read_whole_file(file, token); e != 0) {
    r.error(node, "admin.token_file", "cannot read '" + file + "': " + std::system_category().message(e));
  } else if (token.find_first_not_of(" \t\r\n") == std::string::npos) {
    r.error(node, "admin.token_file", "the token file '" + file + "' is empty");
  }
}

// allowed_hosts = ["sluice.internal"]: names a browser may reach the admin API by, lower-cased.
void check_allowed_hosts(Reader& r, const toml::node& node, std::vector<std::string>& hosts) {
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    auto& host = hosts[i];
    host = lower(host);
    const bool name = !host.empty() && std::ranges::all_of(host, [](unsigned char c) {
      return std::isalnum(c) != 0 || c == '-' || c == '.';
    });
    if (!name)
      r.error(*node.as_array()->get(i), index_path("admin.allowed_hosts", i),
              "'" + host + "' is not a host name (letters, digits, '-' and '.'; no port)");
  }
}

}  // namespace admin_section

const KeyTable admin_table = admin_section::admin_rows;

void read_admin(Reader& r, const toml::table& root, AdminSection& out) {
  using namespace admin_section;
  const toml::table* table = r.section(root, "admin");
  r.note(root, "admin", "admin", table != nullptr ? "on" : "off");
  if (table == nullptr) return;
  out.enabled = true;  // the section's presence is the switch
  const Read read = r.walk(*table, "admin", admin_table, &out);
  if (const auto* file = read["token_file"]) check_token_file(r, *file, out.token_file);
  if (const auto* hosts = read["allowed_hosts"]) check_allowed_hosts(r, *hosts, out.allowed_hosts);
  const toml::node* node = read["listen"];
  if (node != nullptr) {
    auto address = r.parse_address(*node, "admin.listen", true);
    if (!address) return;
    out.listen = std::move(*address);
  }
  r.record(*table, "admin", admin_table, &out);
  // The admin API drains servers and reloads the config: beyond loopback, only with a token.
  if (out.token_file.empty() && !is_loopback_host(out.listen.host)) {
    r.error(node != nullptr ? *node : static_cast<const toml::node&>(*table), "admin.listen",
            "admin listener on a non-loopback address needs token_file");
  }
  // Port 0 asks the OS for a free port, which cannot collide.
  if (out.listen.port != 0)
    r.claim_listener(out.listen, node != nullptr ? node->source() : table->source(), "admin.listen");
}

}  // namespace sluice::config
