#include "sluice/runtime/listeners.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cctype>

#include <boost/asio/ip/v6_only.hpp>
#include <spdlog/spdlog.h>

#include "sluice/runtime/worker.hpp"
#include "sluice/upstream/upstream.hpp"

namespace sluice {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using reuse_port = net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

namespace {

// "Address already in use" -> "address already in use": it follows a colon in our messages.
std::string reason(const boost::system::error_code& ec) {
  std::string text = ec.message();
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

std::string shown(const tcp::endpoint& ep) {
  const auto address = ep.address().to_string();
  return (ep.address().is_v6() ? "[" + address + "]" : address) + ":" + std::to_string(ep.port());
}

// A bound, listening socket on `io`; every worker binds its own on one address (SO_REUSEPORT),
// so that the kernel spreads connections across them.
tcp::acceptor bind_one(net::io_context& io, const tcp::endpoint& ep, const std::string& what) {
  tcp::acceptor a(io);
  boost::system::error_code ec;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.set_option(reuse_port(true), ec);
  if (!ec && ep.address().is_v6()) a.set_option(net::ip::v6_only(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(4096, ec);
  if (ec) throw ListenError("cannot listen on " + what + ": " + reason(ec));
  return a;
}

}  // namespace

std::string Listeners::Address::key() const {
  return address.to_string() + (tls_listener < 0 ? "" : " tls[" + std::to_string(tls_listener) + "]");
}

std::vector<Listeners::Address> Listeners::of(const config::Config& config) {
  std::vector<Address> out;
  for (const auto& hp : config.server.listen) out.push_back({hp, -1});
  for (std::size_t t = 0; t < config.server.tls.size(); ++t)
    for (const auto& hp : config.server.tls[t].listen) out.push_back({hp, static_cast<int>(t)});
  return out;
}

Listeners::Pending Listeners::bind_new(net::io_context& io, const std::vector<Address>& wanted,
                                       std::size_t workers) const {
  Pending pending;
  for (const auto& want : wanted) {
    const auto key = want.key();
    if (std::any_of(open_.begin(), open_.end(), [&](const Open& o) { return o.key == key; })) continue;
    const auto what = want.address.to_string();
    tcp::endpoint ep;
    try {
      ep = resolve_host_port(want.address);
    } catch (const std::exception& e) {
      throw ListenError("cannot listen on " + what + ": " + e.what());
    }
    Pending::Entry entry{want, {}, {}};
    for (std::size_t i = 0; i < workers; ++i) {
      entry.per_worker.push_back(bind_one(io, ep, what));
      ep = entry.per_worker.back().local_endpoint();  // port 0 is now the port the first bind got
    }
    entry.shown = shown(ep);
    pending.entries.push_back(std::move(entry));
  }
  return pending;
}

void Listeners::apply(Pending pending, const std::vector<Address>& wanted,
                      std::span<const std::unique_ptr<Worker>> workers) {
  for (auto& entry : pending.entries) {
    const auto id = next_id_++;
    for (std::size_t i = 0; i < workers.size(); ++i) {
      auto& acceptor = entry.per_worker[i];
      const auto protocol = acceptor.local_endpoint().protocol();
      workers[i]->add_listener(id, protocol, acceptor.release(), entry.address.tls_listener);
    }
    const int tls = entry.address.tls_listener;
    std::string shown = entry.shown;
    if (tls >= 0) shown += " (TLS, server.tls[" + std::to_string(tls) + "])";
    spdlog::info("listening on {}", shown);
    open_.push_back({entry.address.key(), id, std::move(shown)});
  }
  std::erase_if(open_, [&](const Open& o) {
    const bool kept = std::any_of(wanted.begin(), wanted.end(), [&](const Address& a) { return a.key() == o.key; });
    if (kept) return false;
    for (const auto& w : workers) w->remove_listener(o.id);
    spdlog::info("stopped listening on {}", o.shown);
    return true;
  });
}

}  // namespace sluice
