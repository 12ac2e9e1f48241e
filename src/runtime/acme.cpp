// The ACME client's thread, started with the process for the acme tables of its config.
#include <spdlog/spdlog.h>

#include "sluice/runtime/control_loop.hpp"
#include "sluice/runtime/fleet.hpp"
#include "sluice/runtime/fleet_acme.hpp"
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
  tls::acme::MayOrder may_order;
  if (config_->fleet.enabled) {
    // In a fleet, one instance orders each certificate and the others take it from Redis.
    std::vector<std::shared_ptr<tls::acme::Slot>> slots;
    for (const auto& o : orders) slots.push_back(tls::acme::slot_for(o.domains, config_->acme.storage));
    const auto name = config_->fleet.name.empty() ? default_fleet_name(*config_) : config_->fleet.name;
    fleet_acme_ = std::make_unique<FleetAcme>(io_, config_->fleet, name, std::move(slots));
    fleet_acme_->start();
    for (auto& o : orders) o.challenge_delay = std::chrono::seconds(3);  // two syncs, and slack
    may_order = [fleet = fleet_acme_.get()](const std::string& domain) { return fleet->may_order(domain); };
  }
  acme_ = std::make_unique<tls::acme::AcmeService>(config_->acme.storage, std::move(orders),
                                                   [](const std::string& line) { spdlog::info("acme: {}", line); },
                                                   std::move(may_order));
}

}  // namespace sluice
