#pragma once
// Servers from DNS for a running config: one Source per `resolve` server and per `discover`
// SRV name, each asked again when its answer expires, through one asynchronous Resolver. A
// change of membership calls on_change; the runtime then builds a snapshot from expand(), which
// the EndpointDirectory turns into endpoints exactly as at a reload (same identity = same
// endpoint, with its health, ejections, slow start, drains and pooled connections).
// Control thread only.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/array.hpp>

#include "sluice/config/config.hpp"
#include "sluice/core/clock.hpp"
#include "sluice/discovery/resolver.hpp"
#include "sluice/discovery/source.hpp"

namespace sluice::discovery {

struct ResolveReport;
ResolveReport resolve_once(const config::Config& config);

class Discovery {
public:
  Discovery(boost::asio::io_context& io, const Clock& clock, const config::DnsSection& dns);
  ~Discovery();

  // Follows the sources of `config` (start, reload): a source that stays keeps its servers and
  // its schedule; a new one is resolved at once; one that went is kept aside until prune(), so
  // that a reload that fails can configure() the running config again and lose nothing.
  void configure(const config::Config& config);
  void prune();
  // `config` with every `resolve` server replaced by the servers its name has now and the
  // `discover` servers appended: what snapshots are built from.
  std::shared_ptr<const config::Config> expand(const std::shared_ptr<const config::Config>& config) const;
  // Every source has had its first answer (or failure).
  bool settled() const;
  // Sources that have no servers because they never resolved, as "upstream: name: error".
  std::vector<std::string> failures() const;
  void stop();

  // After a source's membership changed (already logged): upstream, source name, change.
  std::function<void(const std::string&, const std::string&, const Change&)> on_change;

  // For /api/status: the sources of `upstream`, with their TTL, refresh times and staleness.
  boost::json::array status(const std::string& upstream) const;
  // Every name followed, for /metrics (runtime/metric_table.cpp).
  std::vector<const Source*> sources() const;

private:
  friend ResolveReport resolve_once(const config::Config& config);
  struct Followed {
    std::unique_ptr<Source> source;
    std::unique_ptr<boost::asio::steady_timer> timer;
    bool querying = false;
    bool wanted = true;  // false: the last configure() left it out
  };
  void query(Followed& f);
  void on_answer(const std::string& key, Answer answer);
  void schedule(Followed& f);
  Followed* find(const std::string& key);
  bool pending(const std::string& upstream) const;  // a followed name has not answered yet
  bool aside(const std::string& upstream) const;    // names a reload dropped still serve

  boost::asio::io_context& io_;
  const Clock& clock_;
  config::DnsSection dns_;
  Resolver resolver_;
  std::vector<Followed> followed_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// `sluice check --resolve`: one resolution round of every name of `config` (bounded by the
// [dns] timeout and attempts); a line per server it would use ("upstream app: server
// app.internal@10.0.0.5:8080 (dns app.internal, ttl 30s)") and per name that failed.
struct ResolveReport {
  std::vector<std::string> lines;
  std::size_t failed = 0;
};
ResolveReport resolve_once(const config::Config& config);

// "upstream app: +10.0.0.7:8080 -10.0.0.5:8080 (dns app.internal, ttl 30s)"
std::string describe(const std::string& upstream, const Source& source, const Change& change);

}  // namespace sluice::discovery
