#pragma once
// The process, as main() runs it: the control loop (runtime/control_loop.hpp) builds the first
// snapshot, opens the listeners, runs the workers, and on the control thread (the caller of run())
// handles signals: SIGHUP reloads the config file, SIGTERM/SIGINT shut down gracefully.
#include <memory>
#include <string>

#include "sluice/config/config.hpp"

namespace sluice {

class ControlLoop;

class Runtime {
public:
  Runtime(config::Config config, std::string config_path);
  ~Runtime();
  // Blocks until shutdown; returns the process exit code.
  int run();

private:
  std::unique_ptr<ControlLoop> loop_;
};

}  // namespace sluice
