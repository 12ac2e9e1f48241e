// Compiled as a file of the config module by the test layers_reject_upward_include, which passes
// only when this fails to compile because proxy's headers are out of config's reach
// (docs/architecture.md, Layers). Never part of a build target.
#include "sluice/config/config.hpp"
#include "sluice/proxy/downstream_session.hpp"
