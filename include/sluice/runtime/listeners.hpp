#pragma once
// The addresses sluice accepts client connections on ([server] listen and [[server.tls]] listen),
// and how start-up and every reload open them: an address already open stays open (same
// sockets, no connection lost); a new one is bound, on every worker, before any old one closes;
// and a reload binds all of its new addresses or none (a port that cannot be bound fails the
// reload and the old listeners keep serving). At start-up an address may instead take the
// sockets this process inherited (socket activation, binary upgrade: listen_fds.hpp). Control
// thread only.
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "sluice/config/config.hpp"

namespace sluice {

class Worker;
class InheritedListeners;

// "cannot listen on 127.0.0.1:8080: address already in use": the address and the reason, no
// source location.
struct ListenError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Listeners {
public:
  // One configured address: plain HTTP (tls_listener = -1) or of that [[server.tls]] entry.
  struct Address {
    config::HostPort address;
    int tls_listener = -1;
    // Identity across reloads: the address as written and its TLS entry.
    std::string key() const;
  };
  static std::vector<Address> of(const config::Config& config);

  // Sockets bound for addresses not open yet, not yet handed to the workers; destroying it
  // closes them (a reload that fails after binding).
  struct Pending {
    struct Entry {
      Address address;
      std::string shown;  // the bound address, "127.0.0.1:8080" (port 0 resolved)
      // Entry i goes to worker i % workers: one per worker when bound; when inherited, as many
      // as were passed (a binary upgrade passes one per old worker, none of which may close).
      std::vector<boost::asio::ip::tcp::acceptor> per_worker;
      bool inherited = false;
    };
    std::vector<Entry> entries;
  };

  // Binds each address of `wanted` that is not open: one SO_REUSEPORT socket per worker (port 0:
  // the first bind picks the port, the others share it), on `io` (no I/O is done on them there).
  // An address with sockets in `inherited` (start-up only) adopts them instead of binding: one
  // per worker, a worker taking several when more were passed, or a dup() when fewer. An
  // address another process listens on is refused, whatever its SO_REUSEPORT would allow
  // (address_holder.hpp). Throws ListenError; nothing new stays bound then.
  Pending bind_new(boost::asio::io_context& io, const std::vector<Address>& wanted,
                   std::size_t workers, InheritedListeners* inherited = nullptr) const;
  // Hands the pending sockets to the workers, then closes the open addresses that `wanted` no
  // longer has. Logs each address opened and closed.
  void apply(Pending pending, const std::vector<Address>& wanted,
             std::span<const std::unique_ptr<Worker>> workers);
  // The native descriptors of every listening socket handed to the workers, for a binary
  // upgrade to pass on.
  std::vector<int> fds() const;
  // `[server] defer_accept`: whether the kernel hands a connection over only once its first bytes
  // came (TCP_DEFER_ACCEPT, Linux; a silent one after about a second). Applied to the sockets
  // open now (a reload) and to every socket bound or adopted from here on. Default on.
  void set_defer_accept(bool on);

private:
  // Whether one of the open sockets listens on an address overlapping `ep`.
  bool holds(const boost::asio::ip::tcp::endpoint& ep) const;

  struct Open {
    std::string key;
    std::uint64_t id = 0;
    std::string shown;
    std::vector<int> fds;  // the workers' sockets (owned by them)
  };
  std::vector<Open> open_;
  std::uint64_t next_id_ = 1;
  bool defer_accept_ = true;
};

}  // namespace sluice
