#pragma once
// The process: builds the first snapshot, opens listeners, runs the workers, and on the control
// thread (the caller of run()) handles signals: SIGHUP reloads the config file, SIGTERM/SIGINT
// shut down gracefully.
#include <memory>
#include <string>

#include "sluice/config/config.hpp"

namespace sluice {

class Runtime {
public:
  Runtime(config::Config config, std::string config_path);
  ~Runtime();
  // Blocks until shutdown; returns the process exit code.
  int run();

  struct State;  // everything the control thread owns (runtime.cpp)

private:
  std::unique_ptr<State> state_;
};

}  // namespace sluice
