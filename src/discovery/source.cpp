#include "sluice/discovery/source.hpp"

#include <algorithm>

namespace sluice::discovery {

Source::Source(Kind kind, std::string upstream, std::string name, config::ServerConfig server,
               config::Duration interval)
    : kind_(kind),
      upstream_(std::move(upstream)),
      name_(std::move(name)),
      server_(std::move(server)),
      interval_(interval) {}

std::string Source::key() const {
  return upstream_ + '\n' + (kind_ == Kind::srv ? "srv " + name_ : "dns " + server_.address.to_string());
}

void Source::update(config::ServerConfig server, config::Duration interval) {
  server_ = std::move(server);
  interval_ = interval;
  // Settings of the file (weight, max_conns, tls, ...) apply to the servers already found.
  std::vector<config::ServerConfig> again;
  for (const auto& s : servers_) {
    auto next = server_;
    next.address = s.address;
    next.name = s.name;
    next.origin = s.origin;
    next.source = s.source;
    if (kind_ == Kind::srv) {
      next.weight = s.weight;
      next.backup = s.backup;
    }
    next.resolve = false;
    again.push_back(std::move(next));
  }
  servers_ = std::move(again);
}

std::string Source::identity(std::string_view prefix, const boost::asio::ip::address& ip,
                             std::uint16_t port) {
  const config::HostPort hp{ip.to_string(), port};
  return std::string(prefix) + '@' + hp.to_string();
}

Change Source::apply(const Answer& answer, const config::DnsSection& dns, Clock::time_point now) {
  answered_ = true;
  ++counts_[static_cast<int>(answer.outcome)];
  const bool usable = answer.outcome == Outcome::ok || (answer.outcome == Outcome::empty && dns.allow_empty);
  if (usable) {
    stale_since_.reset();
    last_error_.clear();
    ttl_ = answer.ttl;
    resolved_at_ = now;
    const config::Duration ttl = std::chrono::duration_cast<config::Duration>(answer.ttl);
    next_ = now + (interval_.count() != 0 ? interval_ : std::clamp(ttl, dns.min_ttl, dns.max_ttl));
    return replace(servers_of(answer.records));
  }
  last_error_ = answer.outcome == Outcome::empty ? "empty answer (allow_empty = false)" : answer.error;
  next_ = now + retry_after(dns);
  if (servers_.empty()) return {};
  // A failure keeps the last good set: a resolver that hiccups must not empty the upstream.
  if (!stale_since_) stale_since_ = now;
  if (now - *stale_since_ < dns.stale_ttl) return {};
  stale_since_.reset();
  return replace({});
}

// Failures are asked again soon (a name that comes back is followed within a second or so), but
// not faster than min_ttl, nor than once a second.
Clock::duration Source::retry_after(const config::DnsSection& dns) const {
  return std::max<Clock::duration>(dns.min_ttl, std::chrono::seconds(1));
}

std::vector<config::ServerConfig> Source::servers_of(const std::vector<Record>& records) const {
  std::uint16_t primary = 0xffff;
  for (const auto& r : records) primary = std::min(primary, r.priority);
  std::vector<config::ServerConfig> out;
  for (const auto& r : records) {
    auto s = server_;
    const std::uint16_t port = kind_ == Kind::srv ? r.port : server_.address.port;
    s.address = {r.ip.to_string(), port};
    s.resolve = false;
    s.resolve_interval = {};
    s.source = name_;
    if (kind_ == Kind::srv) {
      s.origin = "srv";
      s.name = identity(r.target, r.ip, port);
      // RFC 2782: weight 0 is "very small chance"; sluice's smallest weight is 1.
      s.weight = std::max<std::uint32_t>(1, r.weight);
      s.backup = r.priority > primary;
    } else {
      s.origin = "dns";
      s.name = identity(server_.name.empty() ? server_.address.host : server_.name, r.ip, port);
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  // Two records for one address (two SRV targets naming one host): one server, the first.
  out.erase(std::unique(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name == b.name; }),
            out.end());
  return out;
}

Change Source::replace(std::vector<config::ServerConfig> servers) {
  Change change;
  const auto find = [](const std::vector<config::ServerConfig>& in, const std::string& name) {
    return std::find_if(in.begin(), in.end(), [&](const auto& s) { return s.name == name; });
  };
  for (const auto& s : servers) {
    const auto was = find(servers_, s.name);
    if (was == servers_.end()) change.added.push_back(s.name);
    else if (was->weight != s.weight || was->backup != s.backup) change.reweighted = true;
  }
  for (const auto& s : servers_)
    if (find(servers, s.name) == servers.end()) change.removed.push_back(s.name);
  if (!change.empty()) ++changes_;
  servers_ = std::move(servers);
  return change;
}

}  // namespace sluice::discovery
