#include "sluice/config/config.hpp"

#include <algorithm>
#include <thread>

namespace sluice::config {

std::string HostPort::to_string() const {
  // RFC 3986 §3.2.2: an IPv6 literal is bracketed so that its colons are not read as the port's.
  const bool is_ipv6 = host.find(':') != std::string::npos;
  std::string text = is_ipv6 ? "[" + host + "]" : host;
  return text + ":" + std::to_string(port);
}

unsigned ServerSection::worker_count() const {
  return workers != 0 ? workers : std::max(1u, std::thread::hardware_concurrency());
}

const UpstreamConfig* Config::find_upstream(std::string_view name) const {
  const auto it = std::find_if(upstreams.begin(), upstreams.end(),
                               [name](const UpstreamConfig& u) { return u.name == name; });
  return it == upstreams.end() ? nullptr : &*it;
}

const KeyValue* Config::find_key(std::string_view path) const {
  const auto it = std::find_if(keys.begin(), keys.end(),
                               [path](const KeyValue& k) { return k.path == path; });
  return it == keys.end() ? nullptr : &*it;
}

}  // namespace sluice::config
