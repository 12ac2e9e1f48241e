#include "sluice/runtime/runtime.hpp"

#include "sluice/runtime/control_loop.hpp"

namespace sluice {

Runtime::Runtime(config::Config config, std::string config_path)
    : loop_(std::make_unique<ControlLoop>(std::move(config), std::move(config_path))) {}

Runtime::~Runtime() = default;

int Runtime::run() { return loop_->run(); }

}  // namespace sluice
