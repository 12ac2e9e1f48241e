#include "sluice/upstream/upstream.hpp"

#include <stdexcept>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "sluice/balancer/registry.hpp"

namespace sluice {

namespace net = boost::asio;

Upstream::Upstream(config::UpstreamConfig config, std::vector<std::shared_ptr<Endpoint>> endpoints)
    : config_(std::move(config)), endpoints_(std::move(endpoints)) {
  raw_.reserve(endpoints_.size());
  for (const auto& e : endpoints_) raw_.push_back(e.get());
  balancer_ = make_balancer(config_.balance, raw_, config_);
  if (!balancer_) throw std::runtime_error("unknown balance policy '" + config_.balance + "'");
}

net::ip::tcp::endpoint resolve_host_port(const config::HostPort& hp) {
  boost::system::error_code ec;
  const auto address = net::ip::make_address(hp.host, ec);
  if (!ec) return {address, hp.port};
  net::io_context io;
  net::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(hp.host, std::to_string(hp.port), ec);
  if (ec || results.empty())
    throw std::runtime_error("cannot resolve '" + hp.host + "': " + ec.message());
  return results.begin()->endpoint();
}

std::shared_ptr<Endpoint> EndpointDirectory::obtain(const std::string& upstream,
                                                    const config::ServerConfig& server) {
  const auto key = upstream + '\n' + server.identity();
  const auto resolved = resolve_host_port(server.address);
  for (auto& [k, endpoint] : known_) {
    if (k == key && endpoint->socket_address() == resolved) {
      endpoint->set_weight(server.weight);
      return endpoint;
    }
  }
  auto endpoint = std::make_shared<Endpoint>(server.identity(), server.address, resolved, server.weight);
  known_.emplace_back(key, endpoint);
  return endpoint;
}

}  // namespace sluice
