#include "sluice/endpoint/endpoint.hpp"

namespace sluice {

std::atomic<std::uint32_t> Endpoint::next_id_{0};

const char* to_string(ServerState state) {
  switch (state) {
    case ServerState::up: return "up";
    case ServerState::down: return "down";
    case ServerState::ejected: return "ejected";
    case ServerState::slow_start: return "slow_start";
  }
  return "unknown";
}

Endpoint::Endpoint(std::string identity, config::HostPort address,
                   boost::asio::ip::tcp::endpoint resolved, std::uint32_t weight)
    : id_(next_id_.fetch_add(1, std::memory_order_relaxed)),
      identity_(std::move(identity)),
      address_(std::move(address)),
      address_text_(address_.to_string()),
      resolved_(resolved),
      weight_(weight) {}

Endpoint::~Endpoint() = default;

void Endpoint::set_health(std::shared_ptr<health::ServerHealth> health) { health_ = std::move(health); }

}  // namespace sluice
