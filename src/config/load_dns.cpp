// [dns]: the resolver of `resolve` servers and `discover` (docs/discovery.md).
#include <boost/url/ipv4_address.hpp>
#include <boost/url/ipv6_address.hpp>

#include "reader.hpp"
#include "sluice/config/units.hpp"

namespace sluice::config {

namespace dns_section {

using D = DnsSection;

// Name server addresses: IP literals with a port ("127.0.0.1:53", "[::1]:53").
void read_name_servers(Reader& r, const toml::node& node, const std::string& path, std::vector<HostPort>& servers) {
  const auto* array = node.as_array();
  if (array == nullptr) {
    r.type_error(node, path, "an array of \"ip:port\" strings");
    return;
  }
  std::vector<HostPort> out;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const toml::node& item = *array->get(i);
    auto address = r.parse_address(item, index_path(path, i), false, false);
    if (!address) return;
    if (!boost::urls::parse_ipv4_address(address->host) && !boost::urls::parse_ipv6_address(address->host)) {
      r.error(item, index_path(path, i), "a name server is an IP address, got '" + address->host + "'");
      return;
    }
    out.push_back(std::move(*address));
  }
  servers = std::move(out);
}

// The resolver (its name servers, timeout and tries) is made once, at start: restart keys.
const KeySpec dns_rows[] = {
    value_key<&D::servers, read_name_servers, addresses_text>("servers",
                                                              "Name servers (\"ip:port\"); empty = those of /etc/resolv.conf.")
        .restart()
        .docs("array of strings (ip:port)"),
    duration_key<&D::timeout>("timeout", false, "Per try, per name server.").restart(),
    integer_key<&D::attempts>("attempts", 1, 10, "Tries per name server.").restart(),
    duration_key<&D::min_ttl>("min_ttl", false, "A record's TTL is raised to at least this."),
    duration_key<&D::max_ttl>("max_ttl", false, "A record's TTL is lowered to at most this.")
        .rule([](const void* object) -> std::string {
          const auto& d = *static_cast<const D*>(object);
          if (d.max_ttl >= d.min_ttl) return {};
          return "must be at least min_ttl (" + format_duration(d.min_ttl) + "), got " + format_duration(d.max_ttl);
        }),
    duration_key<&D::stale_ttl>("stale_ttl", true, "After a failed resolution the last answer is kept this long."),
    bool_key<&D::allow_empty>("allow_empty", "Apply an answer with no records."),
};

}  // namespace dns_section

const KeyTable dns_table = dns_section::dns_rows;

void read_dns(Reader& r, const toml::node& node, const std::string& path, DnsSection& out) {
  const toml::table& table = r.table_or_empty(&node, path);
  r.walk(table, path, dns_table, &out);
  r.record(table, path, dns_table, &out);
}

}  // namespace sluice::config
