// The ACME client's thread, started with the process for the acme tables of its config.
#include <spdlog/spdlog.h>

#include "sluice/runtime/control_loop.hpp"
#include "sluice/tls/acme_client.hpp"

namespace sluice {

// [acme] and the listeners' acme tables are read at start: the orders of a reload's config
// would only differ in what a restart picks up (docs/tls.md).
void ControlLoop::start_acme() {
  std::vector<tls::acme::OrderSettings> orders;
  for (const auto& listener : config_->server.tls) {
    if (!listener.acme) continue;
    const auto& a = *listener.acme;
    orders.push_back({a.domains, a.directory, a.email, a.ca_file, a.challenge});
  }
  if (orders.empty()) return;
  acme_ = std::make_unique<tls::acme::AcmeService>(config_->acme.storage, std::move(orders),
                                                   [](const std::string& line) { spdlog::info("acme: {}", line); });
}

}  // namespace sluice
