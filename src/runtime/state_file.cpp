#include "sluice/runtime/state_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "sluice/core/file.hpp"

namespace sluice {

namespace json = boost::json;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

namespace {

constexpr std::string_view format_name = "sluice-state";
constexpr std::int64_t format_version = 1;

std::int64_t ms(Clock::duration d) { return duration_cast<milliseconds>(d).count(); }

milliseconds unix_now() {
  return duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch());
}

json::object server_json(const SavedServer& s) {
  json::object o;
  o["upstream"] = s.upstream;
  o["server"] = s.server;
  o["drained"] = s.drained;
  if (s.health) {
    if (s.health->active_up) o["active_up"] = *s.health->active_up;
    o["ejection_level"] = s.health->ejection_level;
    o["ejected_for_ms"] = ms(s.health->ejected_for);
    if (s.health->slow_start_elapsed) o["slow_start_elapsed_ms"] = ms(*s.health->slow_start_elapsed);
  }
  return o;
}

// A non-negative integer field, or false.
bool read_count(const json::object& o, std::string_view key, std::int64_t& out) {
  const auto* v = o.if_contains(key);
  if (v == nullptr) return true;  // optional
  if (!v->is_int64() && !v->is_uint64()) return false;
  out = v->is_int64() ? v->as_int64() : static_cast<std::int64_t>(v->as_uint64());
  return out >= 0;
}

std::optional<SavedServer> parse_server(const json::value& v, std::string* why) {
  const auto* o = v.if_object();
  const auto* upstream = o ? o->if_contains("upstream") : nullptr;
  const auto* server = o ? o->if_contains("server") : nullptr;
  const auto* drained = o ? o->if_contains("drained") : nullptr;
  if (!upstream || !upstream->is_string() || !server || !server->is_string() || !drained ||
      !drained->is_bool()) {
    *why = "a server entry without upstream, server and drained";
    return std::nullopt;
  }
  SavedServer s{std::string(upstream->as_string()), std::string(server->as_string()),
                drained->as_bool(), std::nullopt};
  if (o->contains("ejection_level")) {
    health::SavedHealth h;
    std::int64_t level = 0, ejected = 0, ramp = -1;
    const auto* up = o->if_contains("active_up");
    if (!read_count(*o, "ejection_level", level) || !read_count(*o, "ejected_for_ms", ejected) ||
        (o->contains("slow_start_elapsed_ms") && !read_count(*o, "slow_start_elapsed_ms", ramp)) ||
        (up != nullptr && !up->is_bool())) {
      *why = "server " + s.upstream + "/" + s.server + ": a field has the wrong type";
      return std::nullopt;
    }
    if (up != nullptr) h.active_up = up->as_bool();
    h.ejection_level = static_cast<unsigned>(std::min<std::int64_t>(level, 64));
    h.ejected_for = milliseconds(ejected);
    if (ramp >= 0) h.slow_start_elapsed = milliseconds(ramp);
    s.health = h;
  }
  return s;
}

// What a write holds, minus the parts that change with time alone (ejection time left, ramp
// progress): a change of this is what makes update() write.
std::string change_key(const SavedState& state) {
  std::string key;
  for (const auto& s : state.servers) {
    key += s.upstream + '/' + s.server + (s.drained ? " D" : " -");
    if (s.health) {
      key += s.health->active_up ? (*s.health->active_up ? " up" : " down") : " n";
      key += ' ' + std::to_string(s.health->ejection_level);
      key += s.health->ejected_for > Clock::duration::zero() ? " E" : " -";
      key += s.health->slow_start_elapsed ? " R" : " -";
    }
    key += '\n';
  }
  return key;
}

}  // namespace

std::string format_state(const SavedState& state) {
  json::object root;
  root["format"] = format_name;
  root["version"] = format_version;
  root["written_at_ms"] = state.written_at.count();
  json::array servers;
  for (const auto& s : state.servers) servers.push_back(server_json(s));
  root["servers"] = std::move(servers);
  return json::serialize(root) + "\n";
}

std::optional<SavedState> parse_state(std::string_view text, std::string* why) {
  boost::system::error_code ec;
  const auto root = json::parse(text, ec);
  if (ec) {
    *why = "not JSON (" + ec.message() + ")";
    return std::nullopt;
  }
  const auto* o = root.if_object();
  const auto* format = o ? o->if_contains("format") : nullptr;
  if (!format || !format->is_string() || format->as_string() != format_name) {
    *why = "not a sluice state file (no \"format\": \"sluice-state\")";
    return std::nullopt;
  }
  const auto* version = o->if_contains("version");
  if (!version || !version->is_int64() || version->as_int64() != format_version) {
    *why = "unknown state file version (this sluice reads version 1)";
    return std::nullopt;
  }
  SavedState state;
  std::int64_t written = 0;
  const auto* servers = o->if_contains("servers");
  if (!read_count(*o, "written_at_ms", written) || !servers || !servers->is_array()) {
    *why = "no servers array";
    return std::nullopt;
  }
  state.written_at = milliseconds(written);
  for (const auto& v : servers->as_array()) {
    auto s = parse_server(v, why);
    if (!s) return std::nullopt;
    state.servers.push_back(std::move(*s));
  }
  return state;
}

SavedState collect_state(const Snapshot& snapshot) {
  SavedState state;
  for (const auto& u : snapshot.upstreams)
    for (const Endpoint* ep : u->endpoints()) {
      SavedServer s{u->name(), ep->identity(), ep->draining() && ep->drained_by_api(), std::nullopt};
      if (ep->has_health()) s.health = ep->health().saved();
      state.servers.push_back(std::move(s));
    }
  return state;
}

std::size_t apply_state(const SavedState& state, const Snapshot& snapshot, milliseconds now,
                        std::string_view source) {
  const auto stopped = std::max(milliseconds(0), now - state.written_at);
  std::size_t restored = 0;
  for (const auto& s : state.servers) {
    for (const auto& u : snapshot.upstreams) {
      if (u->name() != s.upstream) continue;
      for (Endpoint* ep : u->endpoints()) {
        if (ep->identity() != s.server) continue;
        if (s.drained) {
          ep->set_draining(true);
          ep->set_drained_by_api(true);
        }
        if (s.health && ep->has_health()) {
          auto h = *s.health;
          h.ejected_for = std::max<Clock::duration>(Clock::duration::zero(), h.ejected_for - stopped);
          ep->health().restore(h);
        }
        spdlog::info("server {}/{}: restored from {}: {}{}", s.upstream, s.server, source,
                     to_string(ep->state()), s.drained ? ", drained" : "");
        ++restored;
      }
    }
  }
  return restored;
}

StateFile::StateFile(std::string path) : path_(std::move(path)) {}

void StateFile::restore(const Snapshot& snapshot) {
  std::string text;
  if (const int err = read_whole_file(path_, text); err != 0) {
    if (err == ENOENT) spdlog::info("state file {}: none yet; it is written from now on", path_);
    else spdlog::warn("state file {}: {}; ignored", path_, std::strerror(err));
    return;
  }
  restore_state_text(text, snapshot, "state file " + path_);
}

std::string state_text_now(const Snapshot& snapshot) {
  auto state = collect_state(snapshot);
  state.written_at = unix_now();
  return format_state(state);
}

void restore_state_text(std::string_view text, const Snapshot& snapshot, std::string_view source) {
  std::string why;
  const auto state = parse_state(text, &why);
  if (!state) {
    spdlog::warn("{}: {}; ignored, every server starts as configured", source, why);
    return;
  }
  const auto n = apply_state(*state, snapshot, unix_now(), source);
  spdlog::info("{}: {} of {} saved server(s) restored", source, n, state->servers.size());
}

void StateFile::update(const Snapshot& snapshot) {
  const auto state = collect_state(snapshot);
  if (change_key(state) == last_key_) return;
  write(snapshot);
}

void StateFile::write(const Snapshot& snapshot) {
  auto state = collect_state(snapshot);
  state.written_at = unix_now();
  if (write_file(format_state(state))) last_key_ = change_key(state);
}

bool StateFile::write_file(const std::string& text) {
  const std::string tmp = path_ + ".tmp";
  std::string error;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) {
    error = "cannot write " + tmp + ": " + std::strerror(errno);
  } else {
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    // fsync before rename: after a power loss the name points at the whole new file or the old.
    const bool synced = written && ::fsync(fd) == 0;
    const int saved_errno = errno;
    ::close(fd);
    if (!synced) error = "cannot write " + tmp + ": " + std::strerror(saved_errno);
    else if (::rename(tmp.c_str(), path_.c_str()) != 0)
      error = "cannot rename " + tmp + " to " + path_ + ": " + std::strerror(errno);
  }
  if (error.empty()) {
    last_error_.clear();
    return true;
  }
  if (error != last_error_) spdlog::warn("state file: {}; server state will not survive a restart", error);
  last_error_ = error;
  return false;
}

}  // namespace sluice
