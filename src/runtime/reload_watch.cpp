#include "sluice/runtime/reload_watch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sluice {

namespace {

double share(const TrafficCount& c) {
  return c.requests == 0 ? 0.0 : static_cast<double>(c.failed) / static_cast<double>(c.requests);
}

TrafficCount minus(const TrafficCount& a, const TrafficCount& b) {
  return {a.requests - b.requests, a.failed - b.failed};
}

// "41.7 %"
std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %%", fraction * 100.0);
  return text;
}

// "30 s", "2.4 s"
std::string seconds(Clock::duration d) {
  const double s = std::chrono::duration<double>(d).count();
  char text[32];
  if (s >= 10 || std::abs(s - std::round(s)) < 0.05)
    std::snprintf(text, sizeof text, "%.0f s", s);
  else
    std::snprintf(text, sizeof text, "%.1f s", s);
  return text;
}

}  // namespace

void ReloadWatch::record(TrafficCount total, Clock::duration keep) {
  const auto now = clock_.now();
  samples_.push_back({now, total});
  // One sample older than the window stays: it is where the window starts.
  while (samples_.size() > 2 && samples_[1].at <= now - keep) samples_.pop_front();
}

const ReloadWatch::Sample& ReloadWatch::at_or_before(Clock::time_point at) const {
  const Sample* found = &samples_.front();
  for (const auto& s : samples_) {
    if (s.at > at) break;
    found = &s;
  }
  return *found;
}

void ReloadWatch::begin(const config::ReloadSection& settings, std::vector<UpstreamUp> up_before) {
  settings_ = settings;
  up_before_ = std::move(up_before);
  start_ = samples_.empty() ? Sample{clock_.now(), {}} : samples_.back();
  const auto& from = samples_.empty() ? start_ : at_or_before(start_.at - settings.watch);
  before_share_ = share(minus(start_.total, from.total));
  watching_ = settings.watch.count() > 0;
}

std::optional<std::string> ReloadWatch::up_breach(const std::vector<UpstreamUp>& up_now) const {
  const double kept = 1.0 - static_cast<double>(settings_.up_lost_percent) / 100.0;
  for (const auto& now : up_now) {
    const auto before = std::find_if(up_before_.begin(), up_before_.end(),
                                     [&](const UpstreamUp& b) { return b.upstream == now.upstream; });
    // A new upstream, or one with nothing up before, has nothing to lose; one with no server
    // from the file now (all from DNS, not judged) has nothing to judge.
    if (before == up_before_.end() || before->up == 0 || before->total == 0 || now.total == 0) continue;
    const double share_before = static_cast<double>(before->up) / before->total;
    const double share_now = now.total == 0 ? 0.0 : static_cast<double>(now.up) / now.total;
    if (share_now < share_before * kept)
      return "upstream " + now.upstream + ": " + std::to_string(now.up) + " of " +
             std::to_string(now.total) + " servers up (before " + std::to_string(before->up) +
             " of " + std::to_string(before->total) + ")";
  }
  return std::nullopt;
}

std::optional<WatchVerdict> ReloadWatch::judge(const std::vector<UpstreamUp>& up_now) {
  if (!watching_) return std::nullopt;
  const auto now = clock_.now();
  const auto elapsed = now - start_.at;
  const auto window = minus(samples_.empty() ? start_.total : samples_.back().total, start_.total);
  const auto over = " over " + seconds(std::min<Clock::duration>(elapsed, settings_.watch));
  const auto figures = "failed share " + percent(share(window)) + " (before " + percent(before_share_) + ")";
  std::optional<WatchVerdict> verdict;
  if (auto why = up_breach(up_now)) {
    verdict = WatchVerdict{WatchVerdict::Kind::rolled_back, "rolled back: " + *why + " after " + seconds(elapsed)};
  } else if (window.requests >= settings_.min_requests &&
             share(window) * 100.0 >= settings_.failed_percent &&
             share(window) >= settings_.failed_factor * before_share_) {
    verdict = WatchVerdict{WatchVerdict::Kind::rolled_back, "rolled back: " + figures + over};
  } else if (elapsed >= settings_.watch) {
    if (window.requests < settings_.min_requests)
      verdict = WatchVerdict{WatchVerdict::Kind::too_little_traffic,
                             "applied: too little traffic to judge (" + std::to_string(window.requests) +
                                 " answers" + over + ", " + std::to_string(settings_.min_requests) +
                                 " needed)"};
    else
      verdict = WatchVerdict{WatchVerdict::Kind::applied, "applied: " + figures + over};
  }
  if (verdict) watching_ = false;
  return verdict;
}

namespace {

// One worker slot's answers: all of them, and the origin's 5xx and sluice's own (502, 503, 504).
void add_answers(TrafficCount& into, const EndpointCounters& slot) {
  const auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  for (const auto& r : slot.responses) into.requests += get(r);
  using K = EndpointCounters;
  into.failed += get(slot.responses[K::origin_answer_slot(500)]) + get(slot.responses[K::own_answer_slot(500)]);
}

}  // namespace

void TrafficMeter::add(Seen& seen, const TrafficCount& now) {
  total_.requests += now.requests - seen.last.requests;
  total_.failed += now.failed - seen.last.failed;
  seen.last = now;
  seen.read = reads_;
}

TrafficCount TrafficMeter::read(const Snapshot& snapshot, unsigned workers) {
  ++reads_;
  const unsigned slots = std::min(workers, Endpoint::max_worker_slots);
  for (const auto& u : snapshot.upstreams) {
    for (const Endpoint* ep : u->endpoints()) {
      TrafficCount answers;
      for (unsigned w = 0; w < slots; ++w) add_answers(answers, ep->counters(w));
      add(servers_[ep->id()], answers);
    }
    TrafficCount unserved;
    for (unsigned w = 0; w < slots; ++w) add_answers(unserved, u->unserved(w));
    add(unserved_[u->name()], unserved);
  }
  // A server a reload removed may come back with the next (a rollback): its count is remembered
  // for a while, so that its past answers are not counted again; then forgotten (DNS churn).
  constexpr std::uint64_t remembered_reads = 2000;
  std::erase_if(servers_, [&](const auto& e) { return reads_ - e.second.read > remembered_reads; });
  return total_;
}

std::vector<UpstreamUp> servers_up(const Snapshot& snapshot) {
  std::vector<UpstreamUp> out;
  for (const auto& u : snapshot.upstreams) {
    UpstreamUp row{u->name(), 0, 0};
    const auto& servers = u->config().servers;
    for (std::size_t i = 0; i < u->endpoints().size() && i < servers.size(); ++i) {
      // Servers from DNS follow the world, not the edit: not judged. A drain set through the
      // API is the operator's act, not the config's: such a server counts as its health says.
      if (!servers[i].origin.empty()) continue;
      const Endpoint& ep = *u->endpoints()[i];
      const auto state = ep.state();
      const bool healthy = state == ServerState::up || state == ServerState::slow_start;
      ++row.total;
      row.up += healthy && (!ep.draining() || ep.drained_by_api()) ? 1 : 0;
    }
    out.push_back(std::move(row));
  }
  return out;
}

std::string config_fingerprint(const std::string& text) {
  // FNV-1a, 64 bits: identifies a file's version, not a secret.
  std::uint64_t h = 14695981039346656037ULL;
  for (const unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

}  // namespace sluice
