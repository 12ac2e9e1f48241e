#pragma once
// `[server] state_file`: what sluice knows about its servers that a restart would otherwise
// forget (HAProxy's server-state-file): drains made through the admin API, the probes' verdict,
// the passive ejection (back-off level and time left) and slow-start progress.
//
// The file is JSON, written whole to FILE.tmp and renamed over FILE (a reader, or a crash, sees
// the old file or the new one, never half of one):
//   {"format": "sluice-state", "version": 1, "written_at_ms": <unix ms>,
//    "servers": [{"upstream": "app", "server": "app-1", "drained": true, "active_up": false,
//                 "ejection_level": 1, "ejected_for_ms": 3000, "slow_start_elapsed_ms": 1200}]}
// ("active_up" and "slow_start_elapsed_ms" only when they apply.)
//
// At start-up the file is read once and applied to the servers whose upstream and identity
// (name, else address) still exist; the rest is ignored. A missing file is normal (first
// start); an unreadable, truncated or foreign one is logged and ignored, never fatal.
//
// Threads: control thread only. update() is cheap when nothing changed (one status read per
// server) and is called on the health tick, so a burst of changes becomes one write.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/health/server_health.hpp"
#include "sluice/runtime/snapshot.hpp"

namespace sluice {

struct SavedServer {
  std::string upstream;
  std::string server;    // Endpoint::identity()
  bool drained = false;  // drained through the admin API (a config drain comes from the config)
  std::optional<health::SavedHealth> health;  // nullopt: the server has no health state
};

struct SavedState {
  std::chrono::milliseconds written_at{};  // Unix time
  std::vector<SavedServer> servers;
};

std::string format_state(const SavedState& state);
// nullopt, with the reason in `why`, for anything but a well-formed file of this format.
std::optional<SavedState> parse_state(std::string_view text, std::string* why);

// The servers of `snapshot` as the state file keeps them.
SavedState collect_state(const Snapshot& snapshot);
// Applies `state` to the servers of `snapshot` that it names; time spent stopped
// (`now` - written_at) counts against ejections. `source` ("the state file") is what each log
// line says the state came from. Returns how many servers were restored.
std::size_t apply_state(const SavedState& state, const Snapshot& snapshot,
                        std::chrono::milliseconds now, std::string_view source);

// The state of `snapshot` now, in the file's format: what a binary upgrade hands to the new
// process (upgrade.hpp), state file or not.
std::string state_text_now(const Snapshot& snapshot);
// Parses `text` (the file's format) and applies it to `snapshot`, logging what was restored from
// `source`; a malformed text is logged and ignored, never fatal.
void restore_state_text(std::string_view text, const Snapshot& snapshot, std::string_view source);

class StateFile {
public:
  explicit StateFile(std::string path);

  // At start-up, before traffic and probes: reads the file and applies it.
  void restore(const Snapshot& snapshot);
  // Writes the file when what it holds changed since the last write.
  void update(const Snapshot& snapshot);
  // Writes the file now (at stop: slow-start progress and ejection time left are current).
  void write(const Snapshot& snapshot);

  const std::string& path() const noexcept { return path_; }

private:
  bool write_file(const std::string& text);

  std::string path_;
  std::string last_key_;    // what the last write held, without the time-varying parts
  std::string last_error_;  // the last write error, logged once until it changes
};

}  // namespace sluice
