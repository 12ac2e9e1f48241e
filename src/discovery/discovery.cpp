#include "sluice/discovery/discovery.hpp"

#include <spdlog/spdlog.h>

#include <boost/json/object.hpp>


namespace sluice::discovery {

namespace net = boost::asio;

namespace {

// The sources a config asks for, in file order.
std::vector<std::unique_ptr<Source>> sources_of(const config::Config& config) {
  std::vector<std::unique_ptr<Source>> out;
  for (const auto& u : config.upstreams) {
    for (const auto& s : u.servers)
      if (s.resolve)
        out.push_back(std::make_unique<Source>(Source::Kind::name, u.name, s.address.host, s, s.resolve_interval));
    if (!u.discover_srv.empty()) {
      config::ServerConfig templ;
      templ.tls = u.tls;
      out.push_back(std::make_unique<Source>(Source::Kind::srv, u.name, u.discover_srv, templ, u.discover_interval));
    }
  }
  return out;
}

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// "10.0.0.5:8080" out of "app.internal@10.0.0.5:8080".
std::string address_part(const std::string& identity) {
  const auto at = identity.rfind('@');
  return at == std::string::npos ? identity : identity.substr(at + 1);
}

}  // namespace

std::string describe(const std::string& upstream, const Source& source, const Change& change) {
  std::string text = "upstream " + upstream + ":";
  for (const auto& a : change.added) text += " +" + address_part(a);
  for (const auto& r : change.removed) text += " -" + address_part(r);
  if (change.added.empty() && change.removed.empty()) text += " weights or priorities changed";
  text += std::string(" (") + (source.kind() == Source::Kind::srv ? "srv " : "dns ") + source.name();
  if (source.stale_since() || !source.last_error().empty()) text += ", " + source.last_error();
  else text += ", ttl " + std::to_string(source.ttl().count()) + "s";
  return text + ")";
}

Discovery::Discovery(net::io_context& io, const Clock& clock, const config::DnsSection& dns)
    : io_(io), clock_(clock), dns_(dns), resolver_(io, dns) {}

Discovery::~Discovery() { *alive_ = false; }

void Discovery::configure(const config::Config& config) {
  dns_.min_ttl = config.dns.min_ttl;  // the resolver's own settings need a restart
  dns_.max_ttl = config.dns.max_ttl;
  dns_.stale_ttl = config.dns.stale_ttl;
  dns_.allow_empty = config.dns.allow_empty;
  std::vector<Followed> next;
  for (auto& source : sources_of(config)) {
    if (Followed* old = find(source->key())) {
      // Kept: its servers stay, with the file's new settings.
      old->source->update(source->server(), source->interval());
      old->wanted = true;
      next.push_back(std::move(*old));
    } else {
      next.push_back({std::move(source), std::make_unique<net::steady_timer>(io_)});
    }
  }
  for (auto& f : followed_)
    if (f.source) {  // not in `config`: aside until prune()
      f.wanted = false;
      next.push_back(std::move(f));
    }
  followed_ = std::move(next);
  for (auto& f : followed_)
    if (!f.source->answered() && !f.querying) query(f);
}

// Make before break: the servers of a name a reload dropped keep serving their upstream until
// every new name of that upstream has answered (or failed once).
void Discovery::prune() {
  const auto leaves = [this](const Followed& f) { return !f.wanted && !pending(f.source->upstream()); };
  for (auto& f : followed_)
    if (leaves(f)) f.timer->cancel();
  std::erase_if(followed_, leaves);
}

bool Discovery::pending(const std::string& upstream) const {
  for (const auto& f : followed_)
    if (f.wanted && f.source->upstream() == upstream && !f.source->answered()) return true;
  return false;
}

bool Discovery::aside(const std::string& upstream) const {
  for (const auto& f : followed_)
    if (!f.wanted && f.source->upstream() == upstream) return true;
  return false;
}

Discovery::Followed* Discovery::find(const std::string& key) {
  for (auto& f : followed_)
    if (f.source && f.source->key() == key) return &f;
  return nullptr;
}

void Discovery::query(Followed& f) {
  f.querying = true;
  auto done = [this, alive = alive_, key = f.source->key()](Answer a) {
    if (*alive) on_answer(key, std::move(a));
  };
  if (f.source->kind() == Source::Kind::srv) resolver_.resolve_srv(f.source->name(), std::move(done));
  else resolver_.resolve_host(f.source->name(), std::move(done));
}

void Discovery::on_answer(const std::string& key, Answer answer) {
  Followed* f = find(key);
  if (f == nullptr) return;  // dropped by a reload while the query was out
  f->querying = false;
  Source& s = *f->source;
  const bool was_stale = s.stale_since().has_value();
  const std::string previous_error = s.last_error();
  const auto change = s.apply(answer, dns_, clock_.now());
  const bool failed = !s.last_error().empty();
  // Once per outage (and per new error), not at every retry.
  if (failed && !was_stale && !s.servers().empty())
    spdlog::warn("upstream {}: resolving {} failed ({}); keeping its {} server(s) for up to stale_ttl",
                 s.upstream(), s.name(), s.last_error(), s.servers().size());
  else if (failed && s.servers().empty() && change.empty() && s.last_error() != previous_error)
    spdlog::warn("upstream {}: resolving {} failed ({})", s.upstream(), s.name(), s.last_error());
  else if (!failed && was_stale)
    spdlog::info("upstream {}: {} resolves again", s.upstream(), s.name());
  schedule(*f);
  const std::string upstream = s.upstream(), name = s.name();
  if (!change.empty()) spdlog::info("{}", describe(upstream, s, change));
  // The last new name of a reload answered: the dropped names' servers leave now.
  const bool swapped = aside(upstream) && !pending(upstream);
  if (swapped) prune();  // `f` and `s` may move
  if ((!change.empty() || swapped) && on_change) on_change(upstream, name, change);
}

void Discovery::schedule(Followed& f) {
  const auto wait = f.source->next_query() - clock_.now();
  f.timer->expires_after(std::max<Clock::duration>(wait, Clock::duration::zero()));
  f.timer->async_wait([this, alive = alive_, key = f.source->key()](boost::system::error_code ec) {
    if (ec || !*alive) return;
    if (Followed* found = find(key); found != nullptr && !found->querying) query(*found);
  });
}

std::shared_ptr<const config::Config> Discovery::expand(const std::shared_ptr<const config::Config>& config) const {
  if (followed_.empty()) return config;
  auto out = std::make_shared<config::Config>(*config);
  for (auto& u : out->upstreams) {
    if (!u.discovers()) continue;
    std::vector<config::ServerConfig> servers;
    const auto add = [&](Source::Kind kind, const std::string& key_name) {
      for (const auto& f : followed_) {
        const Source& s = *f.source;
        if (s.upstream() != u.name || s.kind() != kind || !f.wanted) continue;
        if (kind == Source::Kind::name && s.server().address.to_string() != key_name) continue;
        servers.insert(servers.end(), s.servers().begin(), s.servers().end());
      }
    };
    for (const auto& s : u.servers) {
      if (s.resolve) add(Source::Kind::name, s.address.to_string());
      else servers.push_back(s);
    }
    if (!u.discover_srv.empty()) add(Source::Kind::srv, u.discover_srv);
    if (pending(u.name))
      for (const auto& f : followed_)
        if (!f.wanted && f.source->upstream() == u.name)
          servers.insert(servers.end(), f.source->servers().begin(), f.source->servers().end());
    u.servers = std::move(servers);
  }
  return out;
}

bool Discovery::settled() const {
  for (const auto& f : followed_)
    if (f.wanted && !f.source->answered()) return false;
  return true;
}

std::vector<std::string> Discovery::failures() const {
  std::vector<std::string> out;
  for (const auto& f : followed_)
    if (f.wanted && f.source->servers().empty())
      out.push_back(f.source->upstream() + ": " + f.source->name() + ": " +
                    (f.source->answered() ? f.source->last_error() : "no answer yet"));
  return out;
}

void Discovery::stop() {
  *alive_ = false;
  for (auto& f : followed_) f.timer->cancel();
  resolver_.cancel();
}

boost::json::array Discovery::status(const std::string& upstream) const {
  const auto now = clock_.now();
  boost::json::array out;
  for (const auto& f : followed_) {
    const Source& s = *f.source;
    if (s.upstream() != upstream || !f.wanted) continue;
    boost::json::object o;
    o["kind"] = s.kind() == Source::Kind::srv ? "srv" : "dns";
    o["name"] = s.name();
    o["servers"] = s.servers().size();
    o["ttl_s"] = s.ttl().count();
    o["resolved_ms_ago"] = s.resolved_at() == Clock::time_point{} ? -1.0 : ms_between(s.resolved_at(), now);
    o["next_query_ms"] = ms_between(now, s.next_query());
    o["stale"] = s.stale_since().has_value();
    o["stale_for_ms"] = s.stale_since() ? ms_between(*s.stale_since(), now) : 0.0;
    o["last_error"] = s.last_error();
    o["changes"] = s.changes();
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<const Source*> Discovery::sources() const {
  std::vector<const Source*> out;
  out.reserve(followed_.size());
  for (const auto& f : followed_) out.push_back(f.source.get());
  return out;
}

ResolveReport resolve_once(const config::Config& config) {
  // The report says it all: the changes and warnings a running process would log are not.
  const auto level = spdlog::get_level();
  spdlog::set_level(spdlog::level::err);
  net::io_context io;
  Discovery discovery(io, steady_clock(), config.dns);
  discovery.configure(config);
  const auto bound = 2 * config.dns.timeout * config.dns.attempts + std::chrono::seconds(1);
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!discovery.settled() && std::chrono::steady_clock::now() < until)
    if (io.run_one_until(until) == 0) break;
  ResolveReport report;
  for (const auto& f : discovery.followed_) {
    const Source& s = *f.source;
    const std::string from = (s.kind() == Source::Kind::srv ? "srv " : "dns ") + s.name();
    if (s.servers().empty()) {
      ++report.failed;
      report.lines.push_back("upstream " + s.upstream() + ": " + from + ": " +
                             (s.answered() ? s.last_error() : "no answer in time") + "; no servers");
      continue;
    }
    for (const auto& server : s.servers())
      report.lines.push_back("upstream " + s.upstream() + ": server " + server.name + (server.backup ? " backup" : "") +
                             " weight " + std::to_string(server.weight) + " (" + from + ", ttl " +
                             std::to_string(s.ttl().count()) + "s)");
  }
  if (discovery.followed_.empty()) report.lines.push_back("no server is resolved through DNS");
  discovery.stop();
  spdlog::set_level(level);
  return report;
}

}  // namespace sluice::discovery
