#include "sluice/runtime/listeners.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <boost/asio/ip/v6_only.hpp>
#include <spdlog/spdlog.h>

#include "sluice/runtime/address_holder.hpp"
#include "sluice/proxy/worker_context.hpp"
#include "sluice/runtime/listen_fds.hpp"
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

// TCP_DEFER_ACCEPT on a listening socket: the kernel completes a connection's accept only when
// its first bytes arrive (or, for a silent client, after the first SYN-ACK retransmission, about
// a second), so the session's first read finds the request instead of EAGAIN and a readiness
// wait (Connection: close, one connection per request: +19% requests per CPU-second,
// docs/performance.md). Every protocol these listeners speak is client-first (HTTP, TLS, the
// PROXY header). A failure is logged, not fatal: the listener works without it.
void defer_accept(int fd, bool on, const std::string& what) {
  const int seconds = on ? 1 : 0;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds, sizeof seconds) != 0)
    spdlog::warn("{}: cannot set TCP_DEFER_ACCEPT: {}", what, std::strerror(errno));
}

// Options every accepted connection takes from its listening socket (Linux copies them into each
// one), set before a connection can arrive so that none is accepted without them: TCP_NODELAY
// (an answer leaves as it is written), and TCP_NOTSENT_LOWAT at proxy::client_unsent_max, the
// bound the response relay keeps a slow reader's unsent bytes under. A failure is logged, not
// fatal: the listener works without them.
void connection_options(int fd, const std::string& what) {
  const int on = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) != 0)
    spdlog::warn("{}: cannot set TCP_NODELAY: {}", what, std::strerror(errno));
  const int lowat = static_cast<int>(proxy::client_unsent_max);
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat) != 0)
    spdlog::warn("{}: cannot set TCP_NOTSENT_LOWAT: {}", what, std::strerror(errno));
}

// A bound, listening socket on `io`; every worker binds its own on one address (SO_REUSEPORT),
// so that the kernel spreads connections across them.
tcp::acceptor bind_one(net::io_context& io, const tcp::endpoint& ep, const std::string& what,
                       bool defer) {
  tcp::acceptor a(io);
  boost::system::error_code ec;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.set_option(reuse_port(true), ec);
  if (!ec && ep.address().is_v6()) a.set_option(net::ip::v6_only(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) connection_options(a.native_handle(), what);
  if (!ec) a.listen(4096, ec);
  if (ec) throw ListenError("cannot listen on " + what + ": " + reason(ec));
  defer_accept(a.native_handle(), defer, what);
  return a;
}

// Inherited listening sockets `fds` (all bound to one address, now owned here), on `io`: each
// kept as it is (a binary upgrade's old workers each had one accept queue, none may close), and
// a dup() of one for every worker beyond their number, so that every worker accepts.
std::vector<tcp::acceptor> adopt(net::io_context& io, const std::vector<int>& fds, std::size_t workers,
                                 const std::string& what, bool defer) {
  std::vector<tcp::acceptor> out;
  const auto assign = [&](int fd) {
    const auto bound = bound_endpoint(fd);
    tcp::acceptor a(io);
    boost::system::error_code ec;
    a.assign(bound && bound->address().is_v6() ? tcp::v6() : tcp::v4(), fd, ec);
    if (ec) {
      ::close(fd);
      throw ListenError("cannot listen on " + what + " (inherited socket): " + reason(ec));
    }
    defer_accept(fd, defer, what);
    connection_options(fd, what);  // connections already queued keep the options they were made with
    out.push_back(std::move(a));
  };
  for (const int fd : fds) assign(fd);
  for (std::size_t i = fds.size(); i < workers; ++i) {
    const int copy = ::dup(fds[i % fds.size()]);
    if (copy < 0) throw ListenError("cannot listen on " + what + " (inherited socket): dup: " + std::strerror(errno));
    assign(copy);
  }
  return out;
}

// Refuses an address another process listens on (address_holder.hpp: SO_REUSEPORT would let a
// second sluice join the first one's sockets and take a share of its connections), naming the
// holder when it can be seen.
void refuse_taken(const tcp::endpoint& ep, const std::string& what) {
  const auto ec = probe_address(ep);
  if (!ec) return;
  std::string message = "cannot listen on " + what + ": " + reason(ec);
  const auto holder = address_holder(ep);
  if (holder) message += " by " + *holder;
  if (holder && holder->starts_with("sluice "))
    message += "; two sluice processes never share an address: `sluice upgrade` replaces a running one";
  throw ListenError(message);
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
                                       std::size_t workers, InheritedListeners* inherited) const {
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
    if (const auto fds = inherited ? inherited->take_all(ep) : std::vector<int>(); !fds.empty()) {
      entry.per_worker = adopt(io, fds, workers, what, defer_accept_);
      entry.inherited = true;
      ep = entry.per_worker.front().local_endpoint();
    } else if (!holds(ep)) {  // a reload may bind an address anew while its old sockets serve
      refuse_taken(ep, what);
    }
    for (std::size_t i = entry.per_worker.size(); i < workers; ++i) {
      entry.per_worker.push_back(bind_one(io, ep, what, defer_accept_));
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
    std::vector<int> fds;
    for (std::size_t i = 0; i < entry.per_worker.size(); ++i) {
      auto& acceptor = entry.per_worker[i];
      const auto protocol = acceptor.local_endpoint().protocol();
      fds.push_back(acceptor.release());
      workers[i % workers.size()]->add_listener(id, protocol, fds.back(), entry.address.tls_listener);
    }
    const int tls = entry.address.tls_listener;
    std::string shown = entry.shown;
    if (tls >= 0) shown += " (TLS, server.tls[" + std::to_string(tls) + "])";
    spdlog::info("listening on {}{}", shown, entry.inherited ? " (inherited socket)" : "");
    open_.push_back({entry.address.key(), id, std::move(shown), std::move(fds)});
  }
  std::erase_if(open_, [&](const Open& o) {
    const bool kept = std::any_of(wanted.begin(), wanted.end(), [&](const Address& a) { return a.key() == o.key; });
    if (kept) return false;
    for (const auto& w : workers) w->remove_listener(o.id);
    spdlog::info("stopped listening on {}", o.shown);
    return true;
  });
}

bool Listeners::holds(const tcp::endpoint& ep) const {
  for (const auto& o : open_)
    for (const int fd : o.fds)
      if (const auto bound = bound_endpoint(fd); bound && addresses_overlap(*bound, ep)) return true;
  return false;
}

std::vector<int> Listeners::fds() const {
  std::vector<int> out;
  for (const auto& o : open_) out.insert(out.end(), o.fds.begin(), o.fds.end());
  return out;
}

void Listeners::set_defer_accept(bool on) {
  if (on == defer_accept_) return;
  defer_accept_ = on;
  for (const auto& o : open_)
    for (const int fd : o.fds) defer_accept(fd, on, o.shown);
}

}  // namespace sluice
