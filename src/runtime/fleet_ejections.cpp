// Fleet mode's shared ejections ([fleet] share_ejections, fleet_ejections.hpp): this instance's
// new passive ejections, noticed on the health tick and written by the sync loop; the others',
// applied when their message arrives or when a sync reads the hash.
#include "sluice/runtime/fleet_ejections.hpp"

#include <boost/json.hpp>

#include "sluice/health/log.hpp"
#include "sluice/runtime/fleet.hpp"

namespace sluice {

namespace fleet {

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string encode_ejection(const SharedEjection& e) {
  return boost::json::serialize(boost::json::object{{"from", e.from},
                                                    {"upstream", e.upstream},
                                                    {"server", e.server},
                                                    {"until_ms", e.until_ms},
                                                    {"reason", e.reason}});
}

std::optional<SharedEjection> decode_ejection(std::string_view text) {
  boost::system::error_code ec;
  const auto doc = boost::json::parse(text, ec);
  const auto* o = !ec ? doc.if_object() : nullptr;
  if (o == nullptr) return std::nullopt;
  SharedEjection e;
  const auto* until = o->if_contains("until_ms");
  if (!string_field(*o, "from", e.from) || !string_field(*o, "upstream", e.upstream) ||
      !string_field(*o, "server", e.server) || !string_field(*o, "reason", e.reason) || until == nullptr ||
      !until->is_int64())
    return std::nullopt;
  e.until_ms = until->as_int64();
  return e;
}

bool EjectionShare::take(const SharedEjection& e, std::string_view self, std::int64_t now_ms) {
  if (e.from == self || e.until_ms <= now_ms) return false;
  auto& last = applied[server_field(e.upstream, e.server)];
  if (last == e.until_ms) return false;
  last = e.until_ms;
  return true;
}

}  // namespace fleet

namespace net = boost::asio;
namespace json = boost::json;
using boost::system::error_code;

// Health tick: each server's own ejections since the last look; a new one in place is queued for
// the sync loop, which is woken. The first look only takes the count.
void Fleet::notice_ejections() {
  if (!config_.share_ejections) return;
  const auto snapshot = snapshot_();
  const auto now = steady_clock().now();
  const auto wall = fleet::unix_ms();
  bool fresh = false;
  for (const auto& u : snapshot->upstreams) {
    for (const Endpoint* ep : u->endpoints()) {
      if (!ep->has_health()) continue;
      const auto field = fleet::server_field(u->name(), ep->identity());
      const auto seen = ejections_.seen.find(field);
      const auto own = ep->health().own_ejection(seen == ejections_.seen.end() ? 0 : seen->second);
      const bool first = seen == ejections_.seen.end();
      ejections_.seen[field] = own.ejections;
      if (first || !own.ejected || own.until <= now) continue;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(own.until - now).count();
      ejections_.pending[field] = {name_, u->name(), ep->identity(), wall + left, own.reason};
      fresh = true;
    }
  }
  if (fresh) wake();
}

// Writes this instance's new ejections (the hash, then the channel), then reads the hash.
net::awaitable<error_code> Fleet::share_ejections(Clock::time_point deadline) {
  const auto pending = ejections_.pending;
  for (const auto& [field, e] : pending) {
    if (e.until_ms > fleet::unix_ms()) {
      const auto text = fleet::encode_ejection(e);
      const std::array<std::string_view, 4> hset{"HSET", fleet::ejections_key, field, text};
      const std::array<std::string_view, 3> publish{"PUBLISH", fleet::ejections_channel, text};
      auto r = co_await link_.command(hset, deadline);
      if (r) r = co_await link_.command(publish, deadline);
      if (!r) co_return r.error();
      ++ejections_.published;
    }
    const auto now = ejections_.pending.find(field);
    if (now != ejections_.pending.end() && now->second.until_ms == e.until_ms) ejections_.pending.erase(now);
  }
  co_return co_await read_ejections(deadline);
}

// The hash: each record applied (once), and those past their end removed (only if unchanged:
// another instance may have written a new one meanwhile).
net::awaitable<error_code> Fleet::read_ejections(Clock::time_point deadline) {
  constexpr std::string_view remove_if_same =
      "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) "
      "else return 0 end";
  const std::array<std::string_view, 2> hgetall{"HGETALL", fleet::ejections_key};
  const auto all = co_await link_.command(hgetall, deadline);
  if (!all) co_return all.error();
  const auto now = fleet::unix_ms();
  ejections_.known.clear();
  std::erase_if(ejections_.applied, [now](const auto& a) { return a.second <= now; });
  for (std::size_t i = 0; i + 1 < all->elements.size(); i += 2) {
    const auto& field = all->elements[i].str;
    const auto& text = all->elements[i + 1].str;
    const auto e = fleet::decode_ejection(text);
    if (e && e->until_ms > now) {
      ejections_.known[field] = *e;
      apply_ejection(*e);
      continue;
    }
    const std::array<std::string_view, 6> remove{"EVAL", remove_if_same, "1", fleet::ejections_key, field, text};
    if (const auto r = co_await link_.command(remove, deadline); !r) co_return r.error();
  }
  co_return error_code{};
}

// Another instance's ejection, applied to this instance's copy of the server for the time left.
void Fleet::apply_ejection(const fleet::SharedEjection& e) {
  const auto now_ms = fleet::unix_ms();
  if (!config_.share_ejections || !ejections_.take(e, name_, now_ms)) return;
  const auto snapshot = snapshot_();
  for (const auto& u : snapshot->upstreams) {
    if (u->name() != e.upstream) continue;
    for (Endpoint* ep : u->endpoints()) {
      if (ep->identity() != e.server || !ep->has_health()) continue;
      const auto until = steady_clock().now() + std::chrono::milliseconds(e.until_ms - now_ms);
      const auto t = ep->health().shared_ejection(until, "by " + e.from + " through the fleet: " + e.reason);
      if (!t) return;
      if (t->event == health::HealthEvent::ejected) ++ejections_.applied_here;
      health::log_transition(u->name(), *ep, *t);
      return;
    }
  }
}

// A record that came on the channel: applied now, without waiting for the next sync.
void Fleet::on_ejection_message(std::string_view text) {
  if (const auto e = fleet::decode_ejection(text); e && up_) {
    ejections_.known[fleet::server_field(e->upstream, e->server)] = *e;
    apply_ejection(*e);
  }
}

// /api/fleet: the ejections in place in the fleet (this instance's included), time left.
json::array Fleet::ejections_json() const {
  json::array out;
  const auto now = fleet::unix_ms();
  for (const auto& [field, e] : ejections_.known) {
    if (e.until_ms <= now) continue;
    out.push_back(json::object{{"server", field}, {"from", e.from}, {"left_ms", e.until_ms - now}, {"reason", e.reason}});
  }
  return out;
}

}  // namespace sluice
