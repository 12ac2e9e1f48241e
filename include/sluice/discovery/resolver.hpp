#pragma once
// Asynchronous DNS through c-ares, driven by an Asio io_context (the control thread): c-ares
// says which sockets it wants watched (ARES_OPT_SOCK_STATE_CB) and when its next timeout is;
// their readiness and the timer run ares_process_fd. Nothing blocks: getaddrinfo is never used.
// Control thread only (the io_context's one thread); callbacks run on it.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "sluice/config/config.hpp"
#include "sluice/discovery/source.hpp"

namespace sluice::discovery {

class Resolver {
public:
  using Done = std::function<void(Answer)>;

  // Name servers and tries from [dns]; throws std::runtime_error when c-ares cannot start.
  Resolver(boost::asio::io_context& io, const config::DnsSection& dns);
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  // Every A and AAAA record of `host` (records carry port 0). An answer with none is `empty`.
  void resolve_host(const std::string& host, Done done);
  // The SRV records of `name` (RFC 2782), each target resolved to its addresses.
  void resolve_srv(const std::string& name, Done done);

  // Ends every query in flight without calling back, for good (shutdown: nothing keeps the
  // loop running).
  void cancel();

  // Called by c-ares (through a static trampoline).
  void on_socket_state(int fd, bool readable, bool writable);

private:
  struct Watch {
    std::unique_ptr<boost::asio::posix::stream_descriptor> descriptor;
    std::uint64_t generation = 0;
    bool want_read = false, want_write = false;
    bool reading = false, writing = false;
  };
  void arm(int fd);
  void process(int read_fd, int write_fd);
  void schedule_timeout();

  boost::asio::io_context& io_;
  void* channel_ = nullptr;  // ares_channel
  std::map<int, Watch> sockets_;
  std::uint64_t generation_ = 0;
  boost::asio::steady_timer timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace sluice::discovery
